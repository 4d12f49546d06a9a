#!/usr/bin/env bash
# Renders one overlay of deploy/k8s with `kubectl kustomize` (offline, no cluster) and checks the
# objects it makes against each other and against pkserve's flags:
#   - the kinds: one Deployment, two Services (one headless), an autoscaling/v2 HPA, a policy/v1
#     PodDisruptionBudget, a networking.k8s.io/v1 NetworkPolicy, and the ConfigMap the containers
#     take their settings from;
#   - the containers: pkserve and the front (image pkserve-front, run as the image runs it: its
#     haproxy with the shipped deploy/haproxy/haproxy.cfg), no other;
#   - the flags, as pkserve gets them: its args with each $(VAR) taken from the ConfigMap (a
#     variable that nothing defines is an error: Kubernetes would pass it on literally); the
#     front's PKFRONT_BIND and PKSERVE_ADDR, as its environment has them;
#   - the gRPC port of --address (pkserve's own): a container port of pkserve, every pkserve probe
#     (gRPC probes, on it, not through the front), and the front's PKSERVE_ADDR (127.0.0.1); the
#     port of PKFRONT_BIND: the front's container port "grpc", its probes, and both Services, which
#     send no client to pkserve's own port; the port of --metrics_address: the port "metrics", the
#     Prometheus annotations; the NetworkPolicy admits the front's and the metrics port only;
#   - the shutdown: the front's preStop sleep > pkserve's preStop sleep + --drain_timeout_s (the
#     front forwards while pkserve drains), terminationGracePeriodSeconds > both, and the liveness
#     probe cannot restart a pod that is draining on purpose;
#   - resources and the non-root security context of both containers, the HPA's target and
#     metrics, the PDB's selector;
#   - the overlay's own choices: image pkserve-cuda, --backend=cuda, nvidia.com/gpu: 1 and its
#     toleration for gpu (on pkserve; never on the front); image pkserve-cpu, --backend=cpu and no
#     GPU for cpu.
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
  "PodDisruptionBudget 1 policy/v1" "NetworkPolicy 1 networking.k8s.io/v1"; do
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
containers=$(facts container | awk '{ print $1 }' | sort | tr '\n' ' ')
if [[ $containers != "front pkserve " ]]; then
  fail "expected two containers in the Deployment, pkserve and its front; got: ${containers:-none}"
  echo "FAILED: $failures of $checks checks on $overlay"
  exit 1
fi
c=pkserve
front=front

# --- the environment of each container -----------------------------------------------------------
# load_env CONTAINER ARRAY: fills the associative ARRAY with the container's variables (its envFrom
# ConfigMaps, then its env, which wins).
load_env() {
  local container=$1 configmap pair
  local -n into=$2
  while read -r configmap; do
    [[ -n $configmap ]] || continue
    if ! awk -v n="$configmap" \
      '$1 == "object" && $2 == "ConfigMap" && $3 == n { found = 1 } END { exit !found }' \
      "$work/facts"; then
      fail "$container: envFrom names ConfigMap $configmap, which the overlay does not make"
      continue
    fi
    ok "$container: envFrom ConfigMap $configmap is part of the overlay"
    while IFS= read -r pair; do
      into[${pair%%=*}]=${pair#*=}
    done < <(facts configmap "$configmap")
  done < <(facts container.envFrom "$container")
  while IFS= read -r pair; do
    [[ -n $pair ]] && into[${pair%%=*}]=${pair#*=}
  done < <(facts container.env "$container")
}
declare -A env=() front_env=()
load_env "$c" env
load_env "$front" front_env

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
front_bind=${front_env[PKFRONT_BIND]:-}
front_backend=${front_env[PKSERVE_ADDR]:-}
front_port=$(port_of "$front_bind")
[[ -n $front_bind ]] && is_int "$front_port" \
  || fail "the front's PKFRONT_BIND='$front_bind' (haproxy.cfg's bind address) has no port"
[[ -n $front_backend ]] || fail "the front has no PKSERVE_ADDR (haproxy.cfg's address of pkserve)"
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
image=$(facts container "$c" | value_of image)
if [[ $image =~ (^|/)$want_image(:|@|$) ]]; then
  ok "image $image"
else
  fail "expected image $want_image for the $flavour overlay, got $image"
fi
front_image=$(facts container "$front" | value_of image)
if [[ $front_image =~ (^|/)pkserve-front(:|@|$) ]]; then
  ok "front image $front_image"
else
  fail "expected the front's image to be pkserve-front (deploy/docker/Dockerfile.front), got $front_image"
fi
# The image runs its haproxy on the shipped haproxy.cfg; a command or args would run something else.
overrides=$( (facts container.command "$front"; facts container.arg "$front") | tr '\n' ' ')
[[ -z $overrides ]] && ok "the front runs its image's entrypoint (haproxy on the shipped haproxy.cfg)" \
  || fail "the front sets command/args ($overrides): it must run the image's haproxy on the shipped haproxy.cfg"

# --- ports ---------------------------------------------------------------------------------------
# container_port NAME [CONTAINER]: the number of the named port (of CONTAINER, or of any container:
# a pod's port names are one namespace).
container_port() {
  if (($# == 2)); then
    facts container.port "$2" | awk -v n="$1" '$1 == n { print $2; exit }'
  else
    facts container.port | awk -v n="$1" '$2 == n { print $3; exit }'
  fi
}
for pair in "metrics $metrics_port --metrics_address $c" "grpc $front_port PKFRONT_BIND $front"; do
  read -r name want flag container <<<"$pair"
  got=$(container_port "$name" "$container")
  if [[ $got == "$want" ]]; then
    ok "$container: container port $name is $want, the port of $flag"
  else
    fail "$container: container port $name: expected $want (the port of $flag), got ${got:-none}"
  fi
done
if facts container.port "$c" | awk -v p="$grpc_port" '$2 == p { found = 1 } END { exit !found }'; then
  ok "pkserve: a container port is $grpc_port, the port of --address"
else
  fail "pkserve: no container port is $grpc_port, the port of --address"
fi
if [[ $front_port == "$grpc_port" ]]; then
  fail "the front's PKFRONT_BIND and pkserve's --address share port $grpc_port (one network namespace)"
fi
if [[ $front_backend =~ ^(127\.0\.0\.1|localhost|\[::1\]):([0-9]+)$ && ${BASH_REMATCH[2]} == "$grpc_port" ]]; then
  ok "the front reaches pkserve inside the pod: PKSERVE_ADDR=$front_backend"
else
  fail "the front's PKSERVE_ADDR=$front_backend: expected 127.0.0.1:$grpc_port (pkserve's --address" \
    "port, inside the pod)"
fi

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
  ok "$kind probe: gRPC health on $port (pkserve's own port), service ${service/#-/\"\"}"
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

# The front's probes: on its own port (HAProxy answers no gRPC health: a TCP connect).
for kind in readiness liveness; do
  line=$(facts container.probe "$front" | awk -v k="$kind" '$1 == k')
  if [[ -z $line ]]; then
    [[ $kind == liveness ]] || fail "the front has no $kind probe"
    continue
  fi
  read -r _ handler port _ <<<"$line"
  is_int "$port" || port=$(container_port "$port" "$front")
  if [[ $handler == tcpSocket && $port == "$front_port" ]]; then
    ok "front $kind probe: TCP on $port, the port of PKFRONT_BIND"
  else
    fail "front $kind probe: expected tcpSocket on $front_port (the port of PKFRONT_BIND), got $handler $port"
  fi
done

# --- shutdown ------------------------------------------------------------------------------------
# pre_stop_sleep CONTAINER: the seconds its preStop hook sleeps, or nothing.
pre_stop_sleep() {
  local pre_stop
  pre_stop=$(facts container.preStop "$1" | head -n 1)
  if [[ $pre_stop =~ ^exec\ (/bin/|/usr/bin/)?sleep\ ([0-9]+)$ ]]; then
    echo "${BASH_REMATCH[2]}"
  elif [[ $pre_stop =~ ^sleep\ ([0-9]+)$ ]]; then
    echo "${BASH_REMATCH[1]}"
  fi
}
sleep_s=$(pre_stop_sleep "$c")
front_sleep=$(pre_stop_sleep "$front")
grace=$(facts pod.grace | head -n 1)
grace=${grace:-30}
if [[ -z $sleep_s ]]; then
  fail "expected a preStop hook on pkserve that sleeps (while the endpoints update), got:" \
    "$(facts container.preStop "$c" | head -n 1)"
elif ((grace > sleep_s + drain)); then
  ok "terminationGracePeriodSeconds $grace > preStop sleep $sleep_s + --drain_timeout_s $drain"
else
  fail "terminationGracePeriodSeconds $grace must exceed preStop sleep $sleep_s +" \
    "--drain_timeout_s $drain = $((sleep_s + drain)): the kubelet would kill pkserve mid-drain"
fi
if [[ -z $front_sleep || -z $sleep_s ]]; then
  fail "expected a preStop hook on the front that sleeps while pkserve drains (SIGTERM stops" \
    "HAProxy at once), got: $(facts container.preStop "$front" | head -n 1)"
elif ((front_sleep <= sleep_s + drain)); then
  fail "the front's preStop sleep $front_sleep must exceed pkserve's preStop sleep $sleep_s +" \
    "--drain_timeout_s $drain = $((sleep_s + drain)): the front would stop forwarding mid-drain"
elif ((grace <= front_sleep)); then
  fail "terminationGracePeriodSeconds $grace must exceed the front's preStop sleep $front_sleep"
else
  ok "the front's preStop sleep $front_sleep > $sleep_s + $drain (it forwards until pkserve has" \
    "drained), and < terminationGracePeriodSeconds $grace"
fi

# --- resources -----------------------------------------------------------------------------------
for container in "$c" "$front"; do
  resources=$(facts container.resource "$container")
  for resource in requests.cpu requests.memory limits.cpu limits.memory; do
    got=$(value_of "$resource" <<<"$resources")
    if [[ -n $got ]]; then
      ok "$container: $resource $got"
    else
      fail "$container: the container sets no $resource"
    fi
  done
done
front_gpus=$(facts container.resource "$front" | grep -c 'nvidia.com/gpu')
((front_gpus == 0)) && ok "front: no nvidia.com/gpu" || fail "the front asks for nvidia.com/gpu"
resources=$(facts container.resource "$c")
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
effective() { # the container's setting where it has one, else the pod's
  local got
  got=$(value_of "$1" <<<"$container_sc")
  [[ -n $got ]] || got=$(value_of "$1" <<<"$pod_sc")
  echo "$got"
}
for container in "$c" "$front"; do
  container_sc=$(facts container.securityContext "$container")
  [[ $(effective runAsNonRoot) == true ]] && ok "$container: runAsNonRoot" \
    || fail "$container: expected runAsNonRoot: true (pod or container), got $(effective runAsNonRoot)"
  user=$(effective runAsUser)
  [[ -z $user || $user != 0 ]] && ok "$container: runAsUser ${user:-from the image}" \
    || fail "$container: runAsUser is 0 (root)"
  for setting in allowPrivilegeEscalation=false readOnlyRootFilesystem=true; do
    got=$(value_of "${setting%=*}" <<<"$container_sc")
    [[ $got == "${setting#*=}" ]] && ok "$container: $setting" \
      || fail "$container: expected ${setting%=*}: ${setting#*=} on the container, got ${got:-unset}"
  done
  [[ $(value_of privileged <<<"$container_sc") != true ]] && ok "$container: not privileged" \
    || fail "$container: the container is privileged"
  if facts container.capabilities "$container" | grep -qx 'drop=ALL'; then
    ok "$container: capabilities: drop ALL"
  else
    fail "$container: expected capabilities drop: [ALL], got:" \
      "$(facts container.capabilities "$container" | tr '\n' ' ')"
  fi
done

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
    [[ $(target_port "$target") == "$front_port" ]] && echo "$name $port"
  done <<<"$ports")
  bypass=$(while read -r name port target; do
    [[ $(target_port "$target") == "$grpc_port" ]] && echo "$name"
  done <<<"$ports")
  if [[ -n $bypass ]]; then
    fail "Service $service port $bypass reaches pkserve's own port $grpc_port, past the front"
  fi
  if [[ -z $grpc_line ]]; then
    fail "Service $service has no port that reaches the front's gRPC port $front_port"
  elif [[ $service == "$headless" && ${grpc_line#* } != "$front_port" ]]; then
    fail "headless Service $service: port ${grpc_line#* } must be $front_port itself (clients" \
      "connect to the pods directly, on the port of their target)"
  else
    ok "Service $service port ${grpc_line#* } reaches the front's gRPC port $front_port"
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

# --- NetworkPolicy: other pods reach the front and the metrics, not pkserve's own port ----------------
read -r policy policy_types <<<"$(facts networkpolicy | head -n 1)"
if [[ " $policy_types " == *" Ingress "* ]]; then
  ok "NetworkPolicy $policy restricts ingress"
else
  fail "NetworkPolicy $policy: expected policyTypes to include Ingress, got: ${policy_types:-none}"
fi
selects_pods NetworkPolicy "$policy" "$(facts networkpolicy.selector "$policy")"
allowed=""
while read -r _ port; do
  [[ -n $port ]] || continue
  if [[ $port == all ]]; then
    fail "NetworkPolicy $policy admits every port, pkserve's own $grpc_port among them"
    allowed+=" $front_port $metrics_port"
    continue
  fi
  is_int "$port" || port=$(container_port "$port")
  allowed+=" ${port:-unknown}"
done < <(facts networkpolicy.port "$policy")
[[ " $allowed " == *" $grpc_port "* ]] \
  && fail "NetworkPolicy $policy admits pkserve's own port $grpc_port: clients could pass the front"
for pair in "$front_port front's gRPC" "$metrics_port metrics"; do
  read -r port what <<<"$pair"
  [[ " $allowed " == *" $port "* ]] && ok "NetworkPolicy $policy admits the $what port $port" \
    || fail "NetworkPolicy $policy does not admit the $what port $port (admits:${allowed:- none})"
done

if ((failures > 0)); then
  echo "FAILED: $failures of $checks checks on $overlay"
  exit 1
fi
echo "PASSED: all $checks checks on $overlay ($flavour)"
