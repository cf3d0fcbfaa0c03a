package engine

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
)

// Keyring finds registry credentials for an image.
type Keyring interface {
	// Lookup returns the credentials that may pull image (a reference as a
	// pod names it), most specific first; none means pull anonymously.
	Lookup(image string) []AuthConfig
}

// BasicKeyring is the kubelet's credential keyring
// (pkg/credentialprovider): credentials by registry key, as Docker config
// files and dockerconfigjson Secrets write them ("https://index.docker.io/v1/",
// "registry.example.com:5000", "*.example.com/team"), matched against an
// image as the kubelet matches them (see MatchRegistries). The zero value is
// empty and ready to use.
type BasicKeyring struct {
	creds map[string][]AuthConfig
	keys  []string
}

// Add adds credentials for the registry key.
func (k *BasicKeyring) Add(key string, auth AuthConfig) {
	if k.creds == nil {
		k.creds = map[string][]AuthConfig{}
	}
	norm := RegistryKey(key)
	if _, ok := k.creds[norm]; !ok {
		k.keys = append(k.keys, norm)
	}
	k.creds[norm] = append(k.creds[norm], auth)
}

// Lookup returns the credentials of every key that matches image, the most
// specific key first.
func (k *BasicKeyring) Lookup(image string) []AuthConfig {
	var out []AuthConfig
	for _, key := range MatchRegistries(k.keys, image) {
		out = append(out, k.creds[key]...)
	}
	return out
}

// UnionKeyring looks up each keyring in turn and returns all they find, in
// that order (the kubelet's: a pod's pull secrets, then the node's).
type UnionKeyring []Keyring

func (u UnionKeyring) Lookup(image string) []AuthConfig {
	var out []AuthConfig
	for _, k := range u {
		if k != nil {
			out = append(out, k.Lookup(image)...)
		}
	}
	return out
}

// defaultRegistryKey is the key Docker Hub's credentials go under.
const defaultRegistryKey = "index.docker.io"

// RegistryKey normalizes a registry key of a Docker config as the kubelet
// does: no scheme, and no /v1/ or /v2/ path ("https://index.docker.io/v1/"
// is "index.docker.io"; "https://r.example.com/v2/team" is
// "r.example.com/team").
func RegistryKey(key string) string {
	value := key
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return key
	}
	path := u.Path
	if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
		path = path[3:]
	}
	if path != "" && path != "/" {
		return u.Host + path
	}
	return u.Host
}

// MatchRegistries returns the registry keys (normalized as by RegistryKey)
// whose credentials may pull image, most specific (longest) first, as the
// kubelet's keyring matches them:
//
//   - the image is taken as its normalized repository: "busybox" is
//     "docker.io/library/busybox";
//   - a key matches when its host has as many dot-separated parts as the
//     image's, each matching as a glob ("*.example.com"), the ports are
//     equal ("localhost:5000" is not "localhost"), and its path is a prefix
//     of the image's path;
//   - when no key matches an image of Docker Hub (docker.io/...,
//     index.docker.io/..., or no registry named), the "index.docker.io"
//     key does (the key "https://index.docker.io/v1/" that `docker login`
//     writes).
func MatchRegistries(keys []string, image string) []string {
	repo := image
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		repo = named.Name()
	}
	norm := make([]string, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		k = RegistryKey(k)
		if !seen[k] {
			seen[k] = true
			norm = append(norm, k)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(norm)))
	var out []string
	for _, k := range norm {
		if urlsMatch(k, repo) {
			out = append(out, k)
		}
	}
	if len(out) == 0 && isDefaultRegistry(repo) && seen[defaultRegistryKey] {
		out = append(out, defaultRegistryKey)
	}
	return out
}

// isDefaultRegistry reports whether a repository is pulled from Docker Hub.
func isDefaultRegistry(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// urlsMatch reports whether the schemeless URL target matches glob (host
// parts as globs, equal ports, glob's path a prefix of target's).
func urlsMatch(glob, target string) bool {
	g, err1 := url.Parse("https://" + glob)
	t, err2 := url.Parse("https://" + target)
	if err1 != nil || err2 != nil {
		return false
	}
	gParts, gPort := splitHost(g.Host)
	tParts, tPort := splitHost(t.Host)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false
	}
	for i := range gParts {
		if ok, err := filepath.Match(gParts[i], tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// dockerConfigEntry is one registry's entry of a Docker config: username and
// password, or "auth" (base64 of user:password).
type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// AuthConfig turns the entry into credentials, decoding "auth" when the
// user and password are not given apart.
func (e dockerConfigEntry) authConfig(server string) (AuthConfig, error) {
	a := AuthConfig{Username: e.Username, Password: e.Password, ServerAddress: server,
		IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
	if e.Auth != "" && a.Username == "" && a.Password == "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return a, fmt.Errorf("registry %s: auth is not base64: %w", server, err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return a, fmt.Errorf("registry %s: auth is not user:password", server)
		}
		a.Username, a.Password = user, pass
	}
	return a, nil
}

// AddDockerConfigJSON adds the registries of a Docker config file's content
// ({"auths": {...}}), as a kubernetes.io/dockerconfigjson Secret holds it.
func (k *BasicKeyring) AddDockerConfigJSON(data []byte) error {
	var cfg struct {
		Auths map[string]dockerConfigEntry `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("not a Docker config: %w", err)
	}
	return k.addEntries(cfg.Auths)
}

// AddDockercfg adds the registries of a legacy ~/.dockercfg ({registry:
// entry}), as a kubernetes.io/dockercfg Secret holds it.
func (k *BasicKeyring) AddDockercfg(data []byte) error {
	var auths map[string]dockerConfigEntry
	if err := json.Unmarshal(data, &auths); err != nil {
		return fmt.Errorf("not a .dockercfg: %w", err)
	}
	return k.addEntries(auths)
}

func (k *BasicKeyring) addEntries(auths map[string]dockerConfigEntry) error {
	var errs []error
	keys := make([]string, 0, len(auths))
	for key := range auths {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		a, err := auths[key].authConfig(key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k.Add(key, a)
	}
	return errors.Join(errs...)
}

// KeyringFromSecrets makes a keyring of image pull secrets: Secrets of type
// kubernetes.io/dockerconfigjson (key .dockerconfigjson) or
// kubernetes.io/dockercfg (key .dockercfg). A secret of another type or with
// bad data is an error naming it; the others still count.
func KeyringFromSecrets(secrets []*v1.Secret) (*BasicKeyring, error) {
	k := &BasicKeyring{}
	var errs []error
	for _, s := range secrets {
		var err error
		switch {
		case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
			err = k.AddDockerConfigJSON(s.Data[v1.DockerConfigJsonKey])
		case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
			err = k.AddDockercfg(s.Data[v1.DockerConfigKey])
		default:
			err = fmt.Errorf("type %q with key %s or %s is needed", s.Type, v1.DockerConfigJsonKey, v1.DockerConfigKey)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return k, errors.Join(errs...)
}

// KeyringFunc is a function as a Keyring.
type KeyringFunc func(image string) []AuthConfig

func (f KeyringFunc) Lookup(image string) []AuthConfig { return f(image) }
