#!/usr/bin/env bash
# Renders one overlay of deploy/k8s with `kubectl kustomize` (offline, no cluster) and checks the
# objects it makes against each other and against pkserve's flags:
#   - the kinds: one Deployment, two Services (one headless), an autoscaling/v2 HPA, a policy/v1
#     PodDisruptionBudget, and the ConfigMap the container takes its flags from;
#   - the flags, as the container gets them: its args with each $(VAR) taken from the ConfigMap
#     (a variable that nothing defines is an error: Kubernetes would pass it on literally);
#   - the gRPC port of --address: the container port "grpc", every probe (gRPC probes, on it), and
#     both Services; the port of --metrics_address: the port "metrics", the Prometheus annotations;
#   - the shutdown: terminationGracePeriodSeconds > preStop sleep + --drain_timeout_s, and the
#     liveness probe cannot restart a pod that is draining on purpose;
#   - resources, the non-root security context, the HPA's target and metrics, the PDB's selector;
#   - the overlay's own choices: image pkserve-cuda, --backend=cuda, nvidia.com/gpu: 1 and its
#     toleration for gpu; image pkserve-cpu, --backend=cpu and no GPU for cpu.
# Usage: k8s_check.sh OVERLAY_DIR gpu|cpu     (KUBECTL=/path/to/kubectl to choose the kubectl)
# Prints one line a check and exits non-zero when any failed.
set -uo pipefail

if (($# != 2)) || [[ $2 != gpu && $2 != cpu ]]; then
  echo "usage: $0 OVERLAY_DIR gpu|cpu" >&2
  exit 2
fi
overlay=$1
flavour=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kubectl=${KUBECTL:-kubectl}

if ! command -v "$kubectl" >/dev/null; then
  echo "FAIL: '$kubectl' not found: these tests render the manifests with kubectl kustomize." \
    "scripts/install-deps.sh installs it (Debian's kubernetes-client) where no kubectl exists."
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$kubectl" kustomize "$overlay" >"$work/rendered.yaml" 2>"$work/render.err"; then
  echo "FAIL: kubectl kustomize $overlay failed:"
  cat "$work/render.err"
  exit 1
fi
# Newer kubectl warns about the fields that Debian 12's kubectl (kustomize v2) needs; say nothing
# of those, pass on anything else.
grep -v "^# Warning: '\(bases\|patchesStrategicMerge\)' is deprecated" "$work/render.err" \
  | sed 's/^/note: /'
if ! "$kubectl" label --local -f "$work/rendered.yaml" pkserve.test/facts=1 \
  -o go-template-file="$here/k8s_facts.tmpl" >"$work/facts.raw" 2>"$work/facts.err"; then
  echo "FAIL: kubectl could not read the rendered objects of $overlay:"
  cat "$work/facts.err"
  exit 1
fi
sed 's/^[[:space:]]*//; /^$/d' "$work/facts.raw" >"$work/facts"

failures=0
checks=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  checks=$((checks + 1))
}
ok() {
  echo "ok: $*"
  checks=$((checks + 1))
}
# facts KEY [NAME]: the facts of that key (and object or container name), without the key.
facts() {
  if (($# == 1)); then
    awk -v key="$1" '$1 == key { $1 = ""; sub(/^ /, ""); print }' "$work/facts"
  else
    awk -v key="$1" -v name="$2" '$1 == key && $2 == name { $1 = $2 = ""; sub(/^  /, ""); print }' \
      "$work/facts"
  fi
}
# value_of KEY=VALUE-LINES KEY: the value after "KEY=" on stdin, or nothing.
value_of() { awk -v key="$1" 'index($0, key "=") == 1 { print substr($0, length(key) + 2); exit }'; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }
port_of() { local address=$1; echo "${address##*:}"; }

# --- kinds ---------------------------------------------------------------------------------------
count() { awk -v kind="$1" '$1 == "object" && $2 == kind' "$work/facts" | wc -l; }
for expected in "Deployment 1 apps/v1" "Service 2 v1" "HorizontalPodAutoscaler 1 autoscaling/v2" \
  "PodDisruptionBudget 1 policy/v1"; do
  read -r kind number api <<<"$expected"
  got=$(count "$kind")
  if [[ $got != "$number" ]]; then
    fail "expected $number $kind object(s), got $got"
    continue
  fi
  apis=$(awk -v kind="$kind" '$1 == "object" && $2 == kind { print $4 }' "$work/facts" | sort -u)
  if [[ $apis == "$api" ]]; then
    ok "$number $kind ($api)"
  else
    fail "$kind: expected apiVersion $api, got $apis"
  fi
done

deployment=$(facts deployment | awk '{ print $1 }' | head -n 1)
containers=$(facts container | awk '{ print $1 }')
if [[ $containers != pkserve ]]; then
  fail "expected one container, named pkserve, in the Deployment; got: ${containers:-none}"
  echo "FAILED: $failures of $checks checks on $overlay"
  exit 1
fi
c=pkserve

# --- the flags, as the container gets them -------------------------------------------------------
declare -A env=()
while read -r configmap; do
  [[ -n $configmap ]] || continue
  if ! awk -v n="$configmap" \
    '$1 == "object" && $2 == "ConfigMap" && $3 == n { found = 1 } END { exit !found }' \
    "$work/facts"; then
    fail "envFrom names ConfigMap $configmap, which the overlay does not make"
    continue
  fi
  ok "envFrom ConfigMap $configmap is part of the overlay"
  while IFS= read -r pair; do
    env[${pair%%=*}]=${pair#*=}
  done < <(facts configmap "$configmap")
done < <(facts container.envFrom "$c")
while IFS= read -r pair; do
  [[ -n $pair ]] && env[${pair%%=*}]=${pair#*=}
done < <(facts container.env "$c")

declare -A flags=()
while IFS= read -r arg; do
  [[ -n $arg ]] || continue
  if [[ ! $arg =~ ^--([A-Za-z0-9_]+)=(.*)$ ]]; then
    fail "arg '$arg' is not of the form --flag=value"
    continue
  fi
  name=${BASH_REMATCH[1]}
  value=${BASH_REMATCH[2]}
  expanded=""
  while [[ $value =~ ^([^$]*)\$\(([A-Za-z_][A-Za-z0-9_]*)\)(.*)$ ]]; do
    var=${BASH_REMATCH[2]}
    expanded+=${BASH_REMATCH[1]}
    value=${BASH_REMATCH[3]}
    if [[ -v env[$var] ]]; then
      expanded+=${env[$var]}
    else
      fail "arg '$arg' uses \$($var), which neither the envFrom ConfigMap nor env defines" \
        "(Kubernetes would pass '\$($var)' to pkserve as it is)"
      expanded+="\$($var)"
    fi
  done
  flags[$name]=$expanded$value
done < <(facts container.arg "$c")
echo "flags: $(for f in "${!flags[@]}"; do printf -- "--%s=%s\n" "$f" "${flags[$f]}"; done | sort | tr "\n" " ")"

for flag in address metrics_address drain_timeout_s backend; do
  [[ -v flags[$flag] ]] || fail "the container does not set --$flag"
done
grpc_port=$(port_of "${flags[address]:-}")
metrics_port=$(port_of "${flags[metrics_address]:-}")
drain=${flags[drain_timeout_s]:-}
is_int "$grpc_port" || fail "--address=${flags[address]:-} has no port"
is_int "$metrics_port" || fail "--metrics_address=${flags[metrics_address]:-} has no port"
is_int "$drain" || fail "--drain_timeout_s=$drain is not a whole number of seconds"
if ((failures > 0)); then
  echo "FAILED: $failures of $checks checks on $overlay"
  exit 1
fi

case $flavour in
  gpu) want_backend=cuda want_image=pkserve-cuda ;;
  cpu) want_backend=cpu want_image=pkserve-cpu ;;
esac
if [[ ${flags[backend]} == "$want_backend" ]]; then
  ok "--backend=$want_backend"
else
  fail "expected --backend=$want_backend for the $flavour overlay, got --backend=${flags[backend]}"
fi
image=$(facts container | awk '{ print $2 }' | value_of image)
if [[ $image =~ (^|/)$want_image(:|@|$) ]]; then
  ok "image $image"
else
  fail "expected image $want_image for the $flavour overlay, got $image"
fi

# --- ports ---------------------------------------------------------------------------------------
container_port() { facts container.port "$c" | awk -v n="$1" '$1 == n { print $2; exit }'; }
for pair in "grpc $grpc_port --address" "metrics $metrics_port --metrics_address"; do
  read -r name want flag <<<"$pair"
  got=$(container_port "$name")
  if [[ $got == "$want" ]]; then
    ok "container port $name is $want, the port of $flag"
  else
    fail "container port $name: expected $want (the port of $flag), got ${got:-none}"
  fi
done

# --- probes --------------------------------------------------------------------------------------
for kind in startup readiness liveness; do
  line=$(facts container.probe "$c" | awk -v k="$kind" '$1 == k')
  if [[ -z $line ]]; then
    [[ $kind == startup ]] || fail "no $kind probe"
    continue
  fi
  read -r _ handler port service period failures_allowed <<<"$line"
  if [[ $handler != grpc ]]; then
    fail "$kind probe: expected a gRPC probe (grpc.health.v1 on $grpc_port), got $handler"
    continue
  fi
  if [[ $port != "$grpc_port" ]]; then
    fail "$kind probe: expected port $grpc_port (the port of --address), got $port"
    continue
  fi
  if [[ $service != - && $service != pkserve.v1.SparseMemory ]]; then
    fail "$kind probe: expected health service \"\" or pkserve.v1.SparseMemory, got $service"
    continue
  fi
  ok "$kind probe: gRPC health on $port, service ${service/#-/\"\"}"
  if [[ $kind == liveness ]]; then
    window=$((${period#period=} * ${failures_allowed#failures=}))
    if ((window > drain)); then
      ok "liveness needs ${window}s of failures to restart, more than the ${drain}s drain"
    else
      fail "liveness restarts after ${window}s of failures (periodSeconds x failureThreshold)," \
        "within the ${drain}s drain, during which pkserve reports NOT_SERVING on purpose"
    fi
  fi
done

# --- shutdown ------------------------------------------------------------------------------------
pre_stop=$(facts container.preStop "$c" | head -n 1)
sleep_s=""
if [[ $pre_stop =~ ^exec\ (/bin/|/usr/bin/)?sleep\ ([0-9]+)$ ]]; then
  sleep_s=${BASH_REMATCH[2]}
elif [[ $pre_stop =~ ^sleep\ ([0-9]+)$ ]]; then
  sleep_s=${BASH_REMATCH[1]}
fi
grace=$(facts pod.grace | head -n 1)
grace=${grace:-30}
if [[ -z $sleep_s ]]; then
  fail "expected a preStop hook that sleeps (while the endpoints update), got: ${pre_stop:-none}"
elif ((grace > sleep_s + drain)); then
  ok "terminationGracePeriodSeconds $grace > preStop sleep $sleep_s + --drain_timeout_s $drain"
else
  fail "terminationGracePeriodSeconds $grace must exceed preStop sleep $sleep_s +" \
    "--drain_timeout_s $drain = $((sleep_s + drain)): the kubelet would kill pkserve mid-drain"
fi

# --- resources -----------------------------------------------------------------------------------
resources=$(facts container.resource "$c")
for resource in requests.cpu requests.memory limits.cpu limits.memory; do
  got=$(value_of "$resource" <<<"$resources")
  if [[ -n $got ]]; then
    ok "$resource $got"
  else
    fail "the container sets no $resource"
  fi
done
gpus=$(value_of limits.nvidia.com/gpu <<<"$resources")
gpu_requests=$(value_of requests.nvidia.com/gpu <<<"$resources")
toleration=$(facts pod.toleration | awk '$1 == "nvidia.com/gpu"')
if [[ $flavour == gpu ]]; then
  [[ $gpus == 1 ]] && ok "limits.nvidia.com/gpu 1" \
    || fail "expected limits nvidia.com/gpu: 1 in the gpu overlay, got ${gpus:-none}"
  [[ -n $toleration ]] && ok "tolerates the nvidia.com/gpu taint" \
    || fail "the gpu overlay has no toleration for nvidia.com/gpu"
else
  [[ -z $gpus && -z $gpu_requests ]] && ok "no nvidia.com/gpu" \
    || fail "the cpu overlay asks for nvidia.com/gpu (${gpus:-$gpu_requests})"
fi

# --- security ------------------------------------------------------------------------------------
pod_sc=$(facts pod.securityContext)
container_sc=$(facts container.securityContext "$c")
effective() { # the container's setting where it has one, else the pod's
  local got
  got=$(value_of "$1" <<<"$container_sc")
  [[ -n $got ]] || got=$(value_of "$1" <<<"$pod_sc")
  echo "$got"
}
[[ $(effective runAsNonRoot) == true ]] && ok "runAsNonRoot" \
  || fail "expected runAsNonRoot: true (pod or container), got $(effective runAsNonRoot)"
user=$(effective runAsUser)
[[ -z $user || $user != 0 ]] && ok "runAsUser ${user:-from the image}" \
  || fail "runAsUser is 0 (root)"
for setting in allowPrivilegeEscalation=false readOnlyRootFilesystem=true; do
  got=$(value_of "${setting%=*}" <<<"$container_sc")
  [[ $got == "${setting#*=}" ]] && ok "$setting" \
    || fail "expected ${setting%=*}: ${setting#*=} on the container, got ${got:-unset}"
done
[[ $(value_of privileged <<<"$container_sc") != true ]] && ok "not privileged" \
  || fail "the container is privileged"
if facts container.capabilities "$c" | grep -qx 'drop=ALL'; then
  ok "capabilities: drop ALL"
else
  fail "expected capabilities drop: [ALL], got: $(facts container.capabilities "$c" | tr '\n' ' ')"
fi

# --- Prometheus ----------------------------------------------------------------------------------
annotations=$(facts pod.annotation)
for pair in "prometheus.io/scrape true" "prometheus.io/port $metrics_port" \
  "prometheus.io/path /metrics"; do
  read -r key want <<<"$pair"
  got=$(value_of "$key" <<<"$annotations")
  [[ $got == "$want" ]] && ok "annotation $key: $want" \
    || fail "expected pod annotation $key: \"$want\", got ${got:-none}"
done

# --- Services ------------------------------------------------------------------------------------
pod_labels=$(facts pod.label)
selects_pods() { # KIND NAME SELECTOR-LINES: every selector label is a pod label
  local kind=$1 name=$2 selector=$3 pair
  if [[ -z $selector ]]; then
    fail "$kind $name has an empty selector"
    return
  fi
  while IFS= read -r pair; do
    if ! grep -qxF "$pair" <<<"$pod_labels"; then
      fail "$kind $name selects $pair, which the Deployment's pods do not carry"
      return
    fi
  done <<<"$selector"
  ok "$kind $name selects the Deployment's pods"
}
# target_port NAME-OR-NUMBER: the container port it means
target_port() { if is_int "$1"; then echo "$1"; else container_port "$1"; fi; }
headless=$(facts service | awk '$2 == "clusterIP=None" { print $1 }')
plain=$(facts service | awk '$2 != "clusterIP=None" && $3 == "type=ClusterIP" { print $1 }')
if [[ $headless == pkserve-headless ]]; then
  ok "headless Service pkserve-headless (clusterIP: None), the name the README gives clients"
else
  fail "expected one headless Service (clusterIP: None) named pkserve-headless, got: ${headless:-none}"
fi
[[ $(wc -w <<<"$plain") == 1 ]] && ok "ClusterIP Service $plain" \
  || fail "expected one ClusterIP Service beside the headless one, got: ${plain:-none}"
for service in $headless $plain; do
  selects_pods Service "$service" "$(facts service.selector "$service")"
  ports=$(facts service.port "$service")
  grpc_line=$(while read -r name port target; do
    [[ $(target_port "$target") == "$grpc_port" ]] && echo "$name $port"
  done <<<"$ports")
  if [[ -z $grpc_line ]]; then
    fail "Service $service has no port that reaches the gRPC port $grpc_port"
  elif [[ $service == "$headless" && ${grpc_line#* } != "$grpc_port" ]]; then
    fail "headless Service $service: port ${grpc_line#* } must be $grpc_port itself (clients" \
      "connect to the pods directly, on the port of their target)"
  else
    ok "Service $service port ${grpc_line#* } reaches gRPC port $grpc_port"
  fi
  if [[ $service == "$plain" ]]; then
    metrics_line=$(while read -r name port target; do
      [[ $(target_port "$target") == "$metrics_port" ]] && echo "$name"
    done <<<"$ports")
    [[ -n $metrics_line ]] && ok "Service $service reaches the metrics port $metrics_port" \
      || fail "Service $service has no port that reaches the metrics port $metrics_port"
  fi
done

# --- HPA and PDB ---------------------------------------------------------------------------------
read -r hpa target min max <<<"$(facts hpa | head -n 1)"
[[ $target == "target=Deployment/$deployment" ]] && ok "HPA $hpa scales Deployment $deployment" \
  || fail "HPA $hpa: expected target=Deployment/$deployment, got $target"
min=${min#min=}
max=${max#max=}
((min >= 1 && max >= min)) && ok "HPA replicas $min..$max" \
  || fail "HPA $hpa: expected 1 <= minReplicas <= maxReplicas, got $min..$max"
metrics=$(facts hpa.metric "$hpa")
grep -q '^Resource cpu Utilization=' <<<"$metrics" && ok "HPA on CPU utilization" \
  || fail "HPA $hpa has no CPU utilization metric"
grep -q '^Pods pkserve_queued_rows AverageValue=' <<<"$metrics" && ok "HPA on pkserve_queued_rows" \
  || fail "HPA $hpa has no Pods metric pkserve_queued_rows (AverageValue); got: $(tr '\n' ';' <<<"$metrics")"

read -r pdb min_available max_unavailable <<<"$(facts pdb | head -n 1)"
min_available=${min_available#minAvailable=}
max_unavailable=${max_unavailable#maxUnavailable=}
if [[ $min_available == - && $max_unavailable == - ]]; then
  fail "PodDisruptionBudget $pdb sets neither minAvailable nor maxUnavailable"
elif is_int "$min_available" && ((min_available >= min)); then
  fail "PodDisruptionBudget $pdb: minAvailable $min_available >= the HPA's minReplicas $min" \
    "blocks every node drain"
else
  ok "PodDisruptionBudget $pdb: minAvailable $min_available, maxUnavailable $max_unavailable"
fi
selects_pods PodDisruptionBudget "$pdb" "$(facts pdb.selector "$pdb")"

if ((failures > 0)); then
  echo "FAILED: $failures of $checks checks on $overlay"
  exit 1
fi
echo "PASSED: all $checks checks on $overlay ($flavour)"
