#!/usr/bin/env bash
# Checks the Prometheus alert rules published in docs/operations.md: extracts the YAML block
# under "Alert rules to copy", then `promtool check rules` and `promtool test rules` with
# packaging/prometheus/alerts.test.yml (synthetic series: each alert fires when it should and
# stays quiet when it should). Needs promtool (apt: prometheus).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v promtool >/dev/null || { echo "check-alerts: promtool not found (apt-get install prometheus)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^### Alert rules to copy/{f=1} f&&/^```yaml/{g=1;next} g&&/^```/{exit} g' docs/operations.md \
  > "$work/edgenetd-alerts.yml"
[ -s "$work/edgenetd-alerts.yml" ] || { echo "check-alerts: no rules found in docs/operations.md" >&2; exit 1; }
cp packaging/prometheus/alerts.test.yml "$work/"
promtool check rules "$work/edgenetd-alerts.yml"
promtool test rules "$work/alerts.test.yml"
