#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and the kernel tests (each in a network
# namespace of its own; they need root, and here a skipped kernel test is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh --test

export EDGENETD_KERNEL_TESTS=required
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --features fault-injection -- -D warnings
cargo clippy --all-targets --features kubernetes -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --features fault-injection 2>&1 | tee "$log"
if grep -q "SKIPPED kernel test" "$log"; then
  echo "error: kernel tests were skipped" >&2
  exit 1
fi
# The Kubernetes source (feature off by default): its unit tests and the client against the
# fake API server.
if cargo tree -e normal --features kubernetes | grep -E "aws-lc|tokio|hyper"; then
  echo "error: the kubernetes feature pulls in aws-lc, tokio or hyper" >&2
  exit 1
fi
# One feature set for all of them, so the crate is built once more, not once per step.
k8s=kubernetes,fault-injection
cargo test --features $k8s --lib kubernetes
cargo test --features $k8s --test kubernetes
# The CLI, the manifests and the docs as the feature build has them.
cargo test --features $k8s --test repo
# kube-proxy's own packet-flow tables and e2e cases, ported (tables in
# target/tmp/kube_proxy_conformance/*.txt; docs/kubernetes.md, "Conformance").
cargo test --features $k8s --test kube_proxy_conformance
echo "edgenetd: all tests passed"
