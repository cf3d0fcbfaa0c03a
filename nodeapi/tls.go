package nodeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path"
	"time"
)

// Where the self-signed serving certificate is kept, under the root dir
// (the kubelet keeps its own at /var/lib/kubelet/pki/kubelet.crt).
const (
	SelfSignedCertFile = "pki/podrun-node.crt"
	SelfSignedKeyFile  = "pki/podrun-node.key"
)

// selfSignedValidity is how long a made certificate is valid; one that
// expires within selfSignedRenewBefore, or does not name the node and its
// addresses, is made again at start.
const (
	selfSignedValidity    = 365 * 24 * time.Hour
	selfSignedRenewBefore = 30 * 24 * time.Hour
)

// servingCertificate is the node API's certificate: from certFile and
// keyFile when given, else the self-signed one under rootDir (made when
// missing, expiring or not naming the node and its addresses).
func servingCertificate(certFile, keyFile, rootDir, nodeName string, ips []net.IP, now time.Time) (tls.Certificate, bool, error) {
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, false, fmt.Errorf("load the serving certificate %s: %w", certFile, err)
		}
		return cert, false, nil
	case certFile != "" || keyFile != "":
		return tls.Certificate{}, false, errors.New("a serving certificate needs both its certificate and key files")
	case rootDir == "":
		return tls.Certificate{}, false, errors.New("no serving certificate and no root dir to keep a self-signed one in")
	}
	dnsNames, allIPs := certNames(nodeName, ips)
	root, err := openRoot(rootDir)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	defer root.Close()
	if cert, err := loadFromRoot(root); err == nil && certFits(cert.Leaf, dnsNames, allIPs, now) {
		return cert, false, nil
	}
	certPEM, keyPEM, err := makeSelfSigned(nodeName, dnsNames, allIPs, now)
	if err != nil {
		return tls.Certificate{}, false, err
	}
	if err := root.MkdirAll(path.Dir(SelfSignedCertFile), 0o700); err != nil {
		return tls.Certificate{}, false, fmt.Errorf("make %s under %s: %w", path.Dir(SelfSignedCertFile), rootDir, err)
	}
	// The key first: a certificate is never left beside a key it does not
	// belong to for longer than the two renames.
	if err := writeFileAtomic(root, SelfSignedKeyFile, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, false, fmt.Errorf("write %s under %s: %w", SelfSignedKeyFile, rootDir, err)
	}
	if err := writeFileAtomic(root, SelfSignedCertFile, certPEM, 0o644); err != nil {
		return tls.Certificate{}, false, fmt.Errorf("write %s under %s: %w", SelfSignedCertFile, rootDir, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, false, fmt.Errorf("the made serving certificate: %w", err)
	}
	return cert, true, nil
}

func openRoot(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the root dir %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open the root dir %s: %w", dir, err)
	}
	return root, nil
}

func loadFromRoot(root *os.Root) (tls.Certificate, error) {
	certPEM, err := root.ReadFile(SelfSignedCertFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := root.ReadFile(SelfSignedKeyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// certNames are the names a self-signed certificate is made for: the node
// name and localhost; the node's IPs and the loopback ones.
func certNames(nodeName string, ips []net.IP) ([]string, []net.IP) {
	dns := []string{"localhost"}
	var all []net.IP
	if ip := net.ParseIP(nodeName); ip != nil {
		all = append(all, ip)
	} else if nodeName != "" {
		dns = append([]string{nodeName}, dns...)
	}
	all = append(all, ips...)
	all = append(all, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	var uniq []net.IP
	for _, ip := range all {
		dup := false
		for _, u := range uniq {
			dup = dup || u.Equal(ip)
		}
		if !dup {
			uniq = append(uniq, ip)
		}
	}
	return dns, uniq
}

// certFits: c is valid for long enough and names every name and IP.
func certFits(c *x509.Certificate, dns []string, ips []net.IP, now time.Time) bool {
	if c == nil || now.Before(c.NotBefore) || now.Add(selfSignedRenewBefore).After(c.NotAfter) {
		return false
	}
	for _, n := range dns {
		if c.VerifyHostname(n) != nil {
			return false
		}
	}
	for _, ip := range ips {
		if c.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

func makeSelfSigned(nodeName string, dns []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make a serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("make a serial number: %w", err)
	}
	cn := nodeName
	if cn == "" {
		cn = "localhost"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeFileAtomic writes name under root through a temporary file and a
// rename, so a podrun killed meanwhile leaves the old file or the new one.
func writeFileAtomic(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	tmp := name + ".tmp"
	_ = root.Remove(tmp) // a leftover keeps its mode: make it anew
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		root.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		root.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		root.Remove(tmp)
		return err
	}
	return root.Rename(tmp, name)
}
