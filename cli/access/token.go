package access

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// TokenAudiences reads the aud claim of a service-account token (a JWT):
// the audiences the API server gave a TokenRequest that named none, which
// the token policy must allow. It verifies nothing (the token comes from
// the API server). Errors never hold the token's bytes: it is a
// credential.
func TokenAudiences(token string) ([]string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("the token the API server issued is not a JWT (want three dot-separated parts): cannot read its audiences")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, errors.New("the token the API server issued is not a JWT (its payload is not base64url): cannot read its audiences")
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, errors.New("the token the API server issued is not a JWT (its payload is not JSON): cannot read its audiences")
	}
	var auds []string
	if len(claims.Aud) > 0 && string(claims.Aud) != "null" {
		var one string
		if err := json.Unmarshal(claims.Aud, &one); err == nil {
			auds = []string{one}
		} else if err := json.Unmarshal(claims.Aud, &auds); err != nil {
			return nil, errors.New("the aud claim of the token the API server issued is neither a string nor a list of strings")
		}
	}
	auds = slices.DeleteFunc(auds, func(a string) bool { return a == "" })
	if len(auds) == 0 {
		return nil, errors.New("the token the API server issued carries no audience (aud claim): cannot bound the tokens the consumer mints to the API server's audiences")
	}
	return auds, nil
}
