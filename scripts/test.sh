#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, and the kernel tests (each in a network
# namespace of its own; they need root, and here a skipped kernel test is a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh --test

export EDGENETD_KERNEL_TESTS=required
# Kernel tests spend their time waiting on the kernel, daemons and timers, not on the CPU: on
# this 2-core machine under load, 8 at a time took policy from 88 to 36 s, service from 50 to
# 31 s and daemon from 54 to 25 s, with nothing flaky. Set RUST_TEST_THREADS to change it.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-8}
cargo fmt --all -- --check
# Without features (what ships), and with every feature at once: together they see every cfg
# branch (the only `not(feature = ...)` code is `not(feature = "fault-injection")`).
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --features kubernetes,fault-injection -- -D warnings
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
# The Kubernetes benchmark's own parsers (kernel object counts, kube-proxy's layout, the event
# reader, the series' quantiles); the benchmark itself is run by hand, never timed here.
cargo test --features $k8s --example bench_kubernetes
echo "edgenetd: all tests passed"
