#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler and placer's kube-oracle into kube/bin from this
# module's pinned versions. Go's module and build caches are reused when the machine has them;
# the first build on 2 cores takes about 15 minutes, a cached one well under a minute.
# Usage: kube/build.sh   (without Go it says so and exits 0: the tests then skip, with the reason)
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null 2>&1; then
    echo "kube/build.sh: no 'go' on PATH: the real control-plane tests will be skipped" >&2
    exit 0
fi
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
release=$(sed -n 's/^\(require\)\{0,1\}[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)[[:space:]]*$/\2/p' go.mod)
[ -n "$release" ] || { echo "kube/build.sh: go.mod requires no k8s.io/kubernetes release" >&2; exit 1; }
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${release} -X k8s.io/component-base/version.gitMajor=${release:1:1} -X k8s.io/component-base/version.gitMinor=$(echo "$release" | cut -d. -f2)"
mkdir -p bin
stamp=$(cat go.mod go.sum tools.go $(find cmd -name '*.go' | sort) | sha256sum | cut -d' ' -f1)
if [ -f bin/STAMP ] && [ "$(cat bin/STAMP)" = "$stamp" ]; then
    echo "kube/build.sh: kube/bin is current ($release)" >&2
    exit 0
fi
build() {  # name package
    local start=$SECONDS
    go build -trimpath -ldflags "$ldflags" -o "bin/$1.new" "$2"
    mv "bin/$1.new" "bin/$1"
    echo "kube/build.sh: $1 built in $((SECONDS - start)) s" >&2
}
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kube-oracle ./cmd/kube-oracle
echo "$release" > bin/RELEASE
echo "$stamp" > bin/STAMP
