package cmd

import (
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
)

// maxManifestBytes bounds what podrun reads from standard input, as the file
// source bounds a file.
const maxManifestBytes = 10 << 20

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("more than %d bytes", maxManifestBytes)
	}
	return data, nil
}

// podSource is a pod and where it came from.
type podSource struct {
	Pod    *v1.Pod
	Source string
}
