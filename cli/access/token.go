/*
Copyright The kbind Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
