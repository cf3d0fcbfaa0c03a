package node

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strings"
)

// HostResolvConf is where the host's resolver configuration is read: the
// kubelet's default --resolv-conf, and the file Docker gives containers.
// ResolvedResolvConf is systemd-resolved's list of its upstream servers.
const (
	HostResolvConf     = "/etc/resolv.conf"
	ResolvedResolvConf = "/run/systemd/resolve/resolv.conf"
)

// readHostResolvConf reads the host's resolver configuration from main
// (HostResolvConf); where that names systemd-resolved's local stub
// 127.0.0.53 alone, from resolved (ResolvedResolvConf), the file Docker
// then gives containers and kubeadm gives the kubelet (resolvConf).
func readHostResolvConf(main, resolved string) (ResolvConf, error) {
	rc, err := ReadResolvConf(main)
	if err != nil || !slices.Equal(rc.Servers, []string{"127.0.0.53"}) {
		return rc, err
	}
	if up, err := ReadResolvConf(resolved); err == nil {
		return up, nil
	}
	return rc, nil
}

// ResolvConf is a resolver configuration: nameservers, search list and
// options ("ndots:5", "edns0").
type ResolvConf struct {
	Servers  []string
	Searches []string
	Options  []string
}

// ReadResolvConf reads the resolv.conf at path, as the kubelet parses the
// host's: nameserver lines accumulate, the last search line wins, and an
// option of a later options line replaces the one of the same name.
func ReadResolvConf(path string) (ResolvConf, error) {
	f, err := os.Open(path)
	if err != nil {
		return ResolvConf{}, err
	}
	defer f.Close()
	return parseResolvConf(io.LimitReader(f, 1<<20))
}

func parseResolvConf(r io.Reader) (ResolvConf, error) {
	var rc ResolvConf
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			rc.Servers = append(rc.Servers, f[1])
		case "search":
			rc.Searches = slices.Clone(f[1:])
		case "options":
			for _, o := range f[1:] {
				name, _, _ := strings.Cut(o, ":")
				rc.Options = slices.DeleteFunc(rc.Options, func(have string) bool {
					n, _, _ := strings.Cut(have, ":")
					return n == name
				})
				rc.Options = append(rc.Options, o)
			}
		}
	}
	return rc, sc.Err()
}
