#!/usr/bin/env bash
# Runs podrun's bundled examples end to end on this machine: prepares it
# (hack/setup.sh), builds podrun, starts the web and job pods with
# `podrun once`, and fetches the page the web pod serves.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bash hack/setup.sh
go build -tags grpcnotrace -o bin/podrun . # see docs/memory.md
./bin/podrun once examples/web.yaml examples/job.yaml
echo
echo "== GET http://127.0.0.1:8080/"
for _ in $(seq 1 20); do
	if out=$(wget -qO- http://127.0.0.1:8080/ 2>/dev/null || curl -fsS http://127.0.0.1:8080/ 2>/dev/null); then
		echo "$out"
		break
	fi
	sleep 0.5
done
echo
echo "The pods keep running: see them with 'bin/podrun ps', remove them with 'bin/podrun down examples/'."
