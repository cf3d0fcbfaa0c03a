package clustertest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// TokenClaims are the claims of a bound service-account token that tests
// check.
type TokenClaims struct {
	Subject    string   `json:"sub"`
	Audience   []string `json:"aud"`
	IssuedAt   int64    `json:"iat"`
	Expiry     int64    `json:"exp"`
	Kubernetes struct {
		Namespace string `json:"namespace"`
		Pod       struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
		Node struct {
			Name string `json:"name"`
		} `json:"node"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// DecodeToken returns a JWT's claims without checking its signature (a
// TokenReview does that).
func DecodeToken(token string) (*TokenClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("a JWT has 3 dot-separated parts, this has %d", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	var c TokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("JWT payload %s: %w", payload, err)
	}
	return &c, nil
}
