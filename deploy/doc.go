// Package deploy holds no code. Its tests check the deployment files kept
// beside it against the code they deploy: the Dockerfile at the root of the
// repository, the Helm chart under helm/strait (rendered with helm, which
// test/interop/install-deps.sh installs) and the Grafana dashboard under
// grafana (its queries against the metrics Strait registers).
package deploy
