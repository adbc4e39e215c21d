package access

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kbind/kbind/engine/credentials"
)

// TokenAudiences reads the aud claim of a service-account token (a JWT):
// the audiences the API server gave a TokenRequest that named none, which
// the token policy must allow. It verifies nothing (the token comes from
// the API server). Errors never hold the token's bytes: it is a
// credential.
func TokenAudiences(token string) ([]string, error) {
	c, err := credentials.ParseToken(token)
	if err != nil {
		return nil, fmt.Errorf("the token the API server issued %s: cannot read its audiences", err)
	}
	auds := slices.DeleteFunc(c.Audiences, func(a string) bool { return a == "" })
	if len(auds) == 0 {
		return nil, errors.New("the token the API server issued carries no audience (aud claim): cannot bound the tokens the consumer mints to the API server's audiences")
	}
	return auds, nil
}
