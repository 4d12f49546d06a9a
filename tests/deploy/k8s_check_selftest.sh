#!/usr/bin/env bash
# Shows that k8s_check.sh fails where it should: copies deploy/k8s to a temporary folder, breaks one
# thing at a time with sed, and expects the checker to fail with a message that names the breakage.
# The unbroken copy must pass first, so that a failure is the breakage's and not the copy's.
# Usage: k8s_check_selftest.sh DEPLOY_K8S_DIR
set -uo pipefail

if (($# != 1)); then
  echo "usage: $0 DEPLOY_K8S_DIR" >&2
  exit 2
fi
source_dir=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/k8s_check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
passed=0

# run_case NAME FILE SED-SCRIPT OVERLAY FLAVOUR EXPECTED-REGEX
#   FILE is relative to the copy of deploy/k8s; an empty SED-SCRIPT changes nothing (the case
#   checks an overlay against the other flavour's expectations).
run_case() {
  local name=$1 file=$2 script=$3 overlay=$4 flavour=$5 expected=$6
  rm -rf "$work/k8s"
  cp -R "$source_dir" "$work/k8s"
  if [[ -n $script ]]; then
    sed -i -e "$script" "$work/k8s/$file"
    if cmp -s "$source_dir/$file" "$work/k8s/$file"; then
      echo "FAIL: $name: the sed script '$script' changed nothing in $file (fix this test)"
      failures=$((failures + 1))
      return
    fi
  fi
  local output status
  output=$("$check" "$work/k8s/overlays/$overlay" "$flavour" 2>&1)
  status=$?
  if ((status == 0)); then
    echo "FAIL: $name: expected k8s_check.sh to fail, it passed"
    failures=$((failures + 1))
  elif ! grep -E '^FAIL' <<<"$output" | grep -qE "$expected"; then
    echo "FAIL: $name: expected a FAIL line matching /$expected/, got:"
    grep -E '^FAIL' <<<"$output" | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok: caught $name: $(grep -E '^FAIL' <<<"$output" | grep -E "$expected" | head -n 1)"
    passed=$((passed + 1))
  fi
}

for flavour in cpu gpu; do
  if ! output=$("$check" "$source_dir/overlays/$flavour" "$flavour" 2>&1); then
    echo "FAIL: the unbroken $flavour overlay does not pass k8s_check.sh:"
    echo "$output" | sed 's/^/    /'
    exit 1
  fi
  echo "ok: the unbroken $flavour overlay passes"
done

base=base/deployment.yaml
flags=base/kustomization.yaml
run_case "grace period shorter than preStop + drain" $base \
  's/terminationGracePeriodSeconds: 40/terminationGracePeriodSeconds: 30/' cpu cpu \
  'terminationGracePeriodSeconds 30 must exceed'
run_case "drain timeout raised past the grace period" $flags \
  's/PKSERVE_DRAIN_TIMEOUT_S=25/PKSERVE_DRAIN_TIMEOUT_S=60/' gpu gpu \
  'terminationGracePeriodSeconds 40 must exceed'
run_case "liveness probe that fires during the drain" $base \
  '/livenessProbe:/,/failureThreshold/ s/failureThreshold: 4/failureThreshold: 2/' cpu cpu \
  'liveness restarts after 20s'
run_case "no preStop sleep" $base 's/command: \["sleep", "5"\]/command: ["true"]/' cpu cpu \
  'preStop hook on pkserve that sleeps'
run_case "pkserve's readiness probe through the front" $base \
  '/readinessProbe:/,/port:/ s/port: 50052/port: 50051/' cpu cpu \
  'readiness probe: expected port 50052'
run_case "readiness probe that is not gRPC" $base \
  '/readinessProbe:/,/grpc:/ s/grpc:/tcpSocket:/' gpu gpu 'readiness probe: expected a gRPC probe'
run_case "--address moved off the probes' and ports' port" $flags \
  's/PKSERVE_ADDRESS=0.0.0.0:50052/PKSERVE_ADDRESS=0.0.0.0:6000/' cpu cpu \
  'pkserve: no container port is 6000'
run_case "--metrics_address moved off the metrics port" $flags \
  's/PKSERVE_METRICS_ADDRESS=0.0.0.0:9090/PKSERVE_METRICS_ADDRESS=0.0.0.0:9191/' cpu cpu \
  'container port metrics: expected 9191'
run_case "a flag variable that nothing defines" $base \
  's/--threads=$(PKSERVE_THREADS)/--threads=$(PKSERVE_THREAD_COUNT)/' cpu cpu \
  'PKSERVE_THREAD_COUNT'
run_case "the headless Service made a ClusterIP one" base/service-headless.yaml \
  '/clusterIP: None/d' cpu cpu 'headless Service'
run_case "a Service selecting other pods" base/service.yaml \
  '/selector:/,/name:/ s/name: pkserve/name: pkserve-old/' cpu cpu \
  'Service pkserve selects app.kubernetes.io/name=pkserve-old'
run_case "root allowed" $base 's/runAsNonRoot: true/runAsNonRoot: false/' cpu cpu \
  'runAsNonRoot: true'
run_case "writable root filesystem" $base \
  's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' gpu gpu 'readOnlyRootFilesystem'
run_case "capabilities kept" $base 's/drop: \["ALL"\]/drop: ["NET_RAW"]/' cpu cpu \
  'capabilities drop'
run_case "no memory request" $base '/requests:/,/memory:/ { /memory:/d }' cpu cpu \
  'no requests.memory'
run_case "the gpu overlay without its GPU" overlays/gpu/gpu.yaml '/nvidia.com\/gpu: 1/d' gpu gpu \
  'limits nvidia.com/gpu: 1'
run_case "the gpu overlay's objects judged as cpu" "" "" gpu cpu \
  'cpu overlay asks for nvidia.com/gpu'
run_case "the cpu overlay on the CUDA image" overlays/cpu/kustomization.yaml \
  's/newName: pkserve-cpu/newName: pkserve-cuda/' cpu cpu 'expected image pkserve-cpu'
run_case "the cpu overlay left on --backend=auto" overlays/cpu/kustomization.yaml \
  's/PKSERVE_BACKEND=cpu/PKSERVE_BACKEND=auto/' cpu cpu 'expected --backend=cpu'
run_case "HPA without the queue metric" base/hpa.yaml \
  's/pkserve_queued_rows/pkserve_queue_depth/' cpu cpu 'pkserve_queued_rows'
run_case "PDB selecting other pods" base/pdb.yaml \
  's/app.kubernetes.io\/name: pkserve/app.kubernetes.io\/name: other/' cpu cpu \
  'PodDisruptionBudget pkserve selects'
run_case "no PDB" $flags '/- pdb.yaml/d' cpu cpu 'expected 1 PodDisruptionBudget'
run_case "no Prometheus port annotation" $base '/prometheus.io\/port/d' cpu cpu \
  'prometheus.io/port'

# The front.
run_case "no front" $base '/- name: front/,/drop: \["ALL"\]/d' cpu cpu \
  'expected two containers in the Deployment, pkserve and its front'
run_case "a front from another image" $base 's/image: pkserve-front:0.1.0/image: haproxy:2.6/' cpu cpu \
  "expected the front's image to be pkserve-front"
run_case "a front running another config" $base \
  's|image: pkserve-front:0.1.0|\0\n          args: ["-db", "-f", "/tmp/other.cfg"]|' gpu gpu \
  'the front sets command/args'
run_case "the front sending to another port" $flags \
  's/PKSERVE_ADDR=127.0.0.1:50052/PKSERVE_ADDR=127.0.0.1:50051/' cpu cpu \
  "the front's PKSERVE_ADDR=127.0.0.1:50051: expected 127.0.0.1:50052"
run_case "the front sending out of the pod" $flags \
  's/PKSERVE_ADDR=127.0.0.1:50052/PKSERVE_ADDR=pkserve:50052/' cpu cpu \
  "PKSERVE_ADDR=pkserve:50052: expected 127.0.0.1:50052"
run_case "the front bound off its container port" $flags \
  's/PKFRONT_BIND=0.0.0.0:50051/PKFRONT_BIND=0.0.0.0:50053/' cpu cpu \
  'front: container port grpc: expected 50053'
run_case "the front's preStop shorter than pkserve's drain" $base \
  's/command: \["sleep", "32"\]/command: ["sleep", "20"]/' cpu cpu \
  "the front's preStop sleep 20 must exceed pkserve's preStop sleep 5 \+ --drain_timeout_s 25"
run_case "a grace period within the front's preStop" $base \
  's/terminationGracePeriodSeconds: 40/terminationGracePeriodSeconds: 31/' gpu gpu \
  "terminationGracePeriodSeconds 31 must exceed the front's preStop sleep 32"
run_case "a Service past the front" base/service.yaml '0,/targetPort: grpc/ s/targetPort: grpc/targetPort: pkserve-grpc/' \
  cpu cpu "Service pkserve port grpc reaches pkserve's own port 50052, past the front"
run_case "the headless Service past the front" base/service-headless.yaml \
  's/port: 50051/port: 50052/; s/targetPort: grpc/targetPort: pkserve-grpc/' cpu cpu \
  "Service pkserve-headless port grpc reaches pkserve's own port 50052"
run_case "a NetworkPolicy admitting pkserve's own port" base/networkpolicy.yaml \
  's/- port: metrics/- port: pkserve-grpc\n          protocol: TCP\n        - port: metrics/' cpu cpu \
  "admits pkserve's own port 50052"
run_case "a NetworkPolicy admitting every port" base/networkpolicy.yaml \
  '/^  ingress:/,$ c\  ingress:\n    - {}' cpu cpu 'admits every port'
run_case "a NetworkPolicy shutting the front out" base/networkpolicy.yaml \
  '/- port: grpc/,/protocol: TCP/d' cpu cpu "does not admit the front's gRPC port 50051"
run_case "no NetworkPolicy" $flags '/- networkpolicy.yaml/d' cpu cpu 'expected 1 NetworkPolicy'
run_case "a front without a readiness probe" $base '/- name: front/,$ { /readinessProbe:/,/failureThreshold/d }' \
  cpu cpu 'the front has no readiness probe'
run_case "a front probed on another port" $base '/- name: front/,$ s/port: 50051/port: 50052/' \
  cpu cpu 'front readiness probe: expected tcpSocket on 50051'
run_case "a front allowed to run as root" $base '/- name: front/,$ s/runAsNonRoot: true/runAsNonRoot: false/' \
  gpu gpu 'front: expected runAsNonRoot: true'
run_case "a front with a writable root filesystem" $base \
  '/- name: front/,$ s/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' cpu cpu \
  'front: expected readOnlyRootFilesystem'
run_case "a front without a memory limit" $base '/- name: front/,$ { /memory: 512Mi/d }' cpu cpu \
  'front: the container sets no limits.memory'

if ((failures > 0)); then
  echo "FAILED: the checker missed $failures of $((failures + passed)) breakages"
  exit 1
fi
echo "PASSED: the checker caught all $passed breakages"
