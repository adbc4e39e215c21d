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

package mutation

import (
	"errors"
	"fmt"
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// toJSON converts an expression's result into the values of unstructured
// content: map[string]any, []any, string, int64, float64, bool and nil.
// The result is always a fresh copy: a value taken from object (an
// expression returning object.spec) shares nothing with it afterwards.
//
// Timestamps and durations become the strings CEL's string() makes of them
// (RFC 3339, and seconds such as "1.5s"), a quantity its canonical string
// (as Kubernetes objects hold quantities). Everything JSON cannot hold is
// refused with the type's name: bytes, NaN and infinities, uints above the
// int64 range, map keys that are not strings, optionals (unwrap them with
// orValue()), and the other Kubernetes library types (IP, CIDR, URL,
// semver: turn them into strings first).
//
// Every value converted — a scalar, a list, a map — takes one from
// values, a string a tenth of its length more (CEL's cost of traversing
// it); with too few left the conversion stops with errResultTooLarge.
// Conversion and what follows (the copy is compared, serialized, sent)
// take time with the value's size, while evaluating object.spec.items
// costs 2: values is how a caller bounds that.
func toJSON(v ref.Val, values *uint64) (any, error) {
	size := uint64(1)
	if s, ok := v.(types.String); ok {
		size += uint64(len(s)) / 10
	}
	if *values < size {
		return nil, errResultTooLarge
	}
	*values -= size
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		if uint64(v) > math.MaxInt64 {
			return nil, fmt.Errorf("the uint %d is larger than the largest integer JSON objects hold here (int64)", uint64(v))
		}
		return int64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("the expression returned NaN or an infinity, which JSON cannot hold")
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Timestamp, types.Duration:
		if s, ok := v.ConvertToType(types.StringType).(types.String); ok {
			return string(s), nil
		}
		return nil, unsupported(v)
	case apiservercel.Quantity:
		if v.Quantity == nil {
			return nil, unsupported(v)
		}
		return v.String(), nil
	case traits.Mapper:
		return mapToJSON(v, values)
	case traits.Lister:
		return listToJSON(v, values)
	default:
		return nil, unsupported(v)
	}
}

// errResultTooLarge stops a conversion that used up its values.
var errResultTooLarge = errors.New("the expression's value is too large")

// unsupported words why a value cannot be written.
func unsupported(v ref.Val) error {
	name := v.Type().TypeName()
	switch v.(type) {
	case *types.Optional:
		return errors.New("the expression returned an optional; unwrap it with .orValue(default) or .value()")
	case types.Bytes:
		return errors.New("the expression returned bytes, which a JSON field cannot hold; convert it with string()")
	}
	return fmt.Errorf("the expression returned a %s, which a JSON field cannot hold; turn it into a string, number, boolean, list or map first", name)
}

// listToJSON converts a CEL list.
func listToJSON(l traits.Lister, values *uint64) ([]any, error) {
	out := make([]any, 0, sizeHint(l, *values))
	it := l.Iterator()
	for i := 0; it.HasNext() == types.True; i++ {
		e, err := toJSON(it.Next(), values)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// mapToJSON converts a CEL map whose keys are strings.
func mapToJSON(m traits.Mapper, values *uint64) (map[string]any, error) {
	out := make(map[string]any, sizeHint(m, *values))
	it := m.Iterator()
	for it.HasNext() == types.True {
		k := it.Next()
		key, ok := k.(types.String)
		if !ok {
			return nil, fmt.Errorf("a map key is a %s; JSON object keys are strings", k.Type().TypeName())
		}
		e, err := toJSON(m.Get(k), values)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", string(key), err)
		}
		out[string(key)] = e
	}
	return out, nil
}

// sizeHint is a container's size when it reports one as an int, at most
// the values left to convert.
func sizeHint(c traits.Sizer, values uint64) int {
	n, _ := c.Size().(types.Int)
	return int(min(uint64(max(n, 0)), values))
}
