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

package faults

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Connection's kubeconfig Secret (enginetest.ConnectionManifest names
// it after the Connection).
var secretKey = client.ObjectKey{Namespace: "kbind", Name: connectionName}

// setKubeconfig writes data as the Connection's kubeconfig, as an operator
// rotating credentials (or pasting the wrong thing) would.
func (e *env) setKubeconfig(t *testing.T, data []byte) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec := &corev1.Secret{}
		if err := e.consumer.Get(context.Background(), secretKey, sec); err != nil {
			return err
		}
		sec.Data = map[string][]byte{"kubeconfig": data}
		return e.consumer.Update(context.Background(), sec)
	}))
}

// serviceAccountKubeconfig creates a provider ServiceAccount bound to
// cluster-admin and returns a kubeconfig with a token of it for server
// (host:port), trusting the provider's CA.
func serviceAccountKubeconfig(t *testing.T, provider *rest.Config, name, server string) []byte {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(provider)
	must(t, err)
	_, err = cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, client.IgnoreAlreadyExists(err))
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "faults-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}},
	}, metav1.CreateOptions{})
	must(t, client.IgnoreAlreadyExists(err))
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)},
	}, metav1.CreateOptions{})
	must(t, err)
	u, err := url.Parse(provider.Host)
	must(t, err)
	u.Host = server
	kc := clientcmdapi.NewConfig()
	kc.Clusters["provider"] = &clientcmdapi.Cluster{Server: u.String(), CertificateAuthorityData: provider.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["provider"] = &clientcmdapi.Context{Cluster: "provider", AuthInfo: name}
	kc.CurrentContext = "provider"
	data, err := clientcmd.Write(*kc)
	must(t, err)
	return data
}

// killedRotating kills the konnector in the middle of a credential
// rotation: the Secret gets a ServiceAccount token for another address of
// the provider (a second proxy), and the konnector is killed as soon as it
// sends its first request there — its new session is being built while
// the old one still runs. After the restart it must use the new
// credentials only; the scenario's teardown rotates back (a rotation
// without a kill).
func killedRotating() scenario {
	var rotated *Proxy
	var kubeconfig []byte
	newHostRequests := func(e *env) float64 {
		v, _ := e.konnector.metric("rest_client_requests_total", map[string]string{"host": rotated.Addr()})
		return v
	}
	return scenario{
		name: "konnector-killed-rotating", objects: 200, lasts: 2 * time.Second, ready: readyBound, converge: convergeBound,
		setup: func(t *testing.T, e *env) func() {
			upstream, err := url.Parse(e.pair.Provider.Config.Host)
			must(t, err)
			rotated, err = NewProxy("provider-rotated", upstream.Host)
			must(t, err)
			kubeconfig = serviceAccountKubeconfig(t, e.pair.Provider.Config, "rotated", rotated.Addr())
			return func() {
				// Rotate back, then the proxy the rotated credentials
				// used may go.
				since := time.Now()
				e.setKubeconfig(t, e.kubeconfig)
				err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					v, _ := e.konnector.metric("rest_client_requests_total", map[string]string{"host": e.proxy.Addr()})
					_, ok := e.monitor.first(since, sample.healthy)
					return v > 0 && ok, nil
				})
				if err != nil {
					t.Errorf("rotating back to the admin credentials: the konnector does not use them: %v", err)
				}
				rotated.Close()
			}
		},
		inject: func(t *testing.T, e *env) func() {
			e.setKubeconfig(t, kubeconfig)
			err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return newHostRequests(e) > 0, nil
			})
			if err != nil {
				t.Fatalf("the konnector never used the rotated credentials: %v", err)
			}
			must(t, e.konnector.Kill(context.Background()))
			return func() { must(t, e.konnector.Start(context.Background())) }
		},
		check: func(t *testing.T, e *env) {
			old, err := e.konnector.metric("rest_client_requests_total", map[string]string{"host": e.proxy.Addr()})
			must(t, err)
			if n := newHostRequests(e); n == 0 || old != 0 {
				t.Errorf("after the restart the konnector sent %v requests with the rotated credentials and %v with the old ones; want some and none", n, old)
			}
		},
	}
}

// secretDeleted deletes the Connection's Secret for good: a delete leaves
// it Terminating behind kbind's finalizer (the Connection still needs it),
// so the suite then removes the finalizer, as an operator forcing the
// deletion would. The heal creates the Secret again.
func secretDeleted() scenario {
	return scenario{
		name: "secret-deleted", objects: 200, lasts: secretReportBound, report: secretReportBound, ready: readyBound, converge: convergeBound,
		reportedSays: []string{"SecretNotFound", "Secret kbind/provider not found"},
		inject: func(t *testing.T, e *env) func() {
			ctx := context.Background()
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name}}
			must(t, e.consumer.Delete(ctx, sec))
			must(t, e.consumer.Get(ctx, secretKey, sec))
			if sec.DeletionTimestamp == nil {
				t.Fatalf("the Secret was deleted at once; want it held by kbind's finalizer (finalizers %v)", sec.Finalizers)
			}
			must(t, e.consumer.Patch(ctx, sec, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				return apierrors.IsNotFound(e.consumer.Get(ctx, secretKey, &corev1.Secret{})), nil
			})
			must(t, err)
			return func() {
				must(t, e.consumer.Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name},
					Data:       map[string][]byte{"kubeconfig": e.kubeconfig},
				}))
			}
		},
	}
}

// secretGarbage overwrites the Connection's kubeconfig with something that
// is not a kubeconfig while the load runs; the heal writes it back.
func secretGarbage() scenario {
	return scenario{
		name: "secret-garbage", objects: 200, lasts: secretReportBound, report: secretReportBound, ready: readyBound, converge: convergeBound,
		reportedSays: []string{"SecretNotFound", "not valid YAML or JSON kubeconfig"},
		inject: func(t *testing.T, e *env) func() {
			e.setKubeconfig(t, []byte(fmt.Sprintf("garbage: [%s", time.Now())))
			return func() { e.setKubeconfig(t, e.kubeconfig) }
		},
	}
}
