package docker

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/docker/cli/cli/config/configfile"

	"github.com/podrun/podrun/engine"
)

// ConfigFileCredentials are registry credentials from a Docker config file
// (~/.docker/config.json, as `docker login` writes it): the entries of its
// "auths", and what its credential helpers ("credHelpers" per registry,
// "credsStore" for all) return, for the helpers whose
// docker-credential-<name> program is on PATH (the others are skipped, with
// a warning). Registries are matched against an image as the kubelet does
// (engine.MatchRegistries). The file is read at every lookup, so an edit (a
// new `docker login`) applies from the next pull on; a missing file has no
// credentials.
type ConfigFileCredentials struct {
	Path string
	Log  *slog.Logger
}

var _ engine.Keyring = (*ConfigFileCredentials)(nil)

// DefaultConfigFile is the Docker CLI's config file: config.json in
// $DOCKER_CONFIG, else in ~/.docker.
func DefaultConfigFile() string {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker", "config.json")
}

// Lookup returns the file's credentials for image, the most specific
// registry first.
func (c *ConfigFileCredentials) Lookup(image string) []engine.AuthConfig {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	cf, err := c.load()
	if errors.Is(err, fs.ErrNotExist) || c.Path == "" {
		return nil
	}
	if err != nil {
		log.Warn("registry credentials: cannot read the Docker config file", "file", c.Path, "err", err)
		return nil
	}
	if s := cf.CredentialsStore; s != "" && !helperExists(s) {
		log.Warn("registry credentials: credential store program not found; using the file's auths", "file", c.Path,
			"program", helperProgram(s))
		cf.CredentialsStore = ""
	}
	byKey := map[string][]string{} // normalized key -> the file's keys
	add := func(key string) {
		n := engine.RegistryKey(key)
		byKey[n] = append(byKey[n], key)
	}
	for key := range cf.AuthConfigs {
		add(key)
	}
	for key, helper := range cf.CredentialHelpers {
		if !helperExists(helper) {
			log.Warn("registry credentials: credential helper not found; skipped", "file", c.Path, "registry", key,
				"program", helperProgram(helper))
			continue
		}
		add(key)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	var out []engine.AuthConfig
	for _, k := range engine.MatchRegistries(keys, image) {
		files := byKey[k]
		sort.Strings(files)
		for _, key := range files {
			ac, err := cf.GetAuthConfig(key)
			if err != nil {
				log.Warn("registry credentials: lookup failed", "file", c.Path, "registry", key, "err", err)
				continue
			}
			if ac.Username == "" && ac.Password == "" && ac.IdentityToken == "" && ac.RegistryToken == "" {
				continue
			}
			server := ac.ServerAddress
			if server == "" {
				server = key
			}
			out = append(out, engine.AuthConfig{
				Username: ac.Username, Password: ac.Password, ServerAddress: server,
				IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken,
			})
		}
	}
	return out
}

func (c *ConfigFileCredentials) load() (*configfile.ConfigFile, error) {
	f, err := os.Open(c.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cf := configfile.New(c.Path)
	if err := cf.LoadFromReader(f); err != nil {
		return nil, err
	}
	return cf, nil
}

func helperProgram(name string) string { return "docker-credential-" + name }

func helperExists(name string) bool {
	_, err := exec.LookPath(helperProgram(name))
	return err == nil
}
