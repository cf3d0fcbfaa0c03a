//go:build !amd64

package pause

// program is nil where no pause program is assembled: the infra image
// then runs `podrun pause`.
var program []byte
