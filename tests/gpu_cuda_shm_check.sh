#!/usr/bin/env bash
# CUDA shared memory and device tensors on a GPU host, in one run of about two to four minutes:
#
# 1. the suite's real-GPU CUDA shared-memory tests (tests/cuda_shared_memory_test.ts against
#    libcuda.so.1: both engines, HTTP and gRPC, DenoTriton's copy counts per path);
# 2. per engine (built-in, Triton core), a server of tests/_gpu/cuda_shm_server.ts and
#    tests/interop/cuda_shared_memory_client.py over HTTP and gRPC: tritonclient's
#    cuda_shared_memory round trips (a host callable, a deviceTensor callable on cuda:0), a bad
#    handle, and an Identity FP32[16M] round trip between two CUDA regions with the server's copy
#    counts, which must show no host copy (one device-to-device copy);
# 3. per engine and protocol, perf_analyzer --shared-memory cuda on Identity (short), 0 errors.
#
# Prints PASS/FAIL lines, the copy counts (COPIES) and figures (FIGURE), then a summary; exits
# non-zero when anything failed or was skipped.
#
#     PYTHONPATH=/tmp/pysite bash tests/gpu_cuda_shm_check.sh \
#       [--perf-analyzer /tmp/pa/perf_analyzer] [--python python3] [--engines "builtin triton"] \
#       [--elements 16777216] [--skip-tests] [--skip-perf] [--driver <CUDA driver library>]
#
# --driver serves with another CUDA driver library (the stand-in of tests/_gpu/, to check this
# script's own plumbing on a host without a GPU: the built-in engine only, and the client then
# fails at tritonclient's CUDA runtime, which the stand-in does not replace).
# --perf-analyzer takes the binary or a folder holding it (and its libraries, e.g. lib/ with
# libcudart.so.12); default: $DENOTRITON_PERF_ANALYZER, /tmp/pa/perf_analyzer, then the PATH.
# The Triton engine needs `deno task setup:triton` done (DENOTRITON_HOME). Type checking is
# skipped (--no-check): `deno task static` checks these files on any host.
set -uo pipefail
cd "$(dirname "$0")/.."
export NO_COLOR=1

python=python3
perf_analyzer=${DENOTRITON_PERF_ANALYZER:-/tmp/pa/perf_analyzer}
engines="builtin triton"
elements=16777216
skip_tests=0
skip_perf=0
driver_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=$2; shift 2 ;;
    --perf-analyzer) perf_analyzer=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --elements) elements=$2; shift 2 ;;
    --skip-tests) skip_tests=1; shift ;;
    --skip-perf) skip_perf=1; shift ;;
    --driver) driver_args=(--driver "$2"); shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)"; exit 2 ;;
  esac
done
case "$elements" in ''|*[!0-9]*) echo "--elements must be a positive integer, got '$elements'"; exit 2 ;; esac
for engine in $engines; do
  case "$engine" in builtin|triton) ;; *) echo "--engines takes builtin and/or triton, got '$engine'"; exit 2 ;; esac
done

logs=$(mktemp -d)
failed=0
passed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
pass() { echo "PASS $*"; passed=$((passed + 1)); }

echo "== host"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not available"
deno --version | head -1
"$python" - <<'EOF' 2>&1
import importlib.util, sys
print("python", sys.version.split()[0])
for name in ("tritonclient", "cuda", "cuda.cudart", "cuda.bindings", "pkg_resources", "numpy"):
    try:
        spec = importlib.util.find_spec(name)
        print(f"  {name}: {spec.origin if spec else 'MISSING'}")
    except Exception as error:
        print(f"  {name}: MISSING ({type(error).__name__}: {error})")
EOF

# perf_analyzer: a binary, or a folder with it and its libraries.
if [ -d "$perf_analyzer" ]; then
  pa_dir=$perf_analyzer
  perf_analyzer=$pa_dir/perf_analyzer
  export LD_LIBRARY_PATH="$pa_dir:$pa_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ ! -x "$perf_analyzer" ]; then perf_analyzer=$(command -v perf_analyzer || true); fi
# Its libb64.so.0d and libcudart.so.12 come with the Triton core install (as tests/_peers.ts
# finds them), under hashed names: linked under their plain names.
if [ -n "$perf_analyzer" ] && ! "$perf_analyzer" --version >/dev/null 2>&1; then
  mkdir -p "$logs/pa_libs"
  home=${DENOTRITON_HOME:-$HOME/.cache/denotriton/triton-2.51.0}
  for pair in "libb64.so.0d:libb64*.so.0d" "libcudart.so.12:libcudart*.so.12*"; do
    found=$(find "$home" -name "${pair#*:}" 2>/dev/null | head -1)
    [ -n "$found" ] && ln -sf "$found" "$logs/pa_libs/${pair%%:*}"
  done
  export LD_LIBRARY_PATH="$logs/pa_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -n "$perf_analyzer" ]; then
  echo "perf_analyzer: $perf_analyzer ($("$perf_analyzer" --version 2>&1 | head -1))"
fi

if [ "$skip_tests" -eq 0 ]; then
  echo "== 1/3: real-GPU tests (tests/cuda_shared_memory_test.ts)"
  timeout 150 deno test -A --no-check tests/cuda_shared_memory_test.ts >"$logs/tests.log" 2>&1
  tests=$?
  grep -E "^CUDA shared memory .* \.\.\. (ok|FAILED|ignored)|passed .* failed" "$logs/tests.log"
  if grep -q "this host's GPU .* \.\.\. ok" "$logs/tests.log" && [ "$tests" -eq 0 ] \
    && ! grep -q "this host's GPU are skipped" "$logs/tests.log"; then
    pass "suite: tests/cuda_shared_memory_test.ts on this host's GPU"
  else
    fail "suite: tests/cuda_shared_memory_test.ts (exit $tests; see $logs/tests.log)"
    sed -n '/ERRORS/,$p' "$logs/tests.log" | head -60
  fi
fi

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=
  fi
}
trap stop_server EXIT

for engine in $engines; do
  echo "== 2/3 and 3/3: $engine engine"
  log=$logs/server_$engine.log
  # Its stdin is a pipe the script holds open: the server stops when the script ends.
  exec 3> >(deno run -A --no-check tests/_gpu/cuda_shm_server.ts --engine "$engine" \
    "${driver_args[@]}" >"$log" 2>&1)
  server_pid=$!
  ready=
  for _ in $(seq 1 120); do
    ready=$(grep -m1 '^READY ' "$log" 2>/dev/null)
    [ -n "$ready" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ -z "$ready" ]; then
    fail "$engine: the server did not start (the end of $log):"
    tail -20 "$log"
    exec 3>&-
    stop_server
    continue
  fi
  http=$(echo "$ready" | sed -E 's/.*http=([^ ]+).*/\1/')
  grpc=$(echo "$ready" | sed -E 's/.*grpc=([^ ]+).*/\1/')
  echo "serving: http=$http grpc=$grpc"
  for protocol in http grpc; do
    url=$http
    [ "$protocol" = grpc ] && url=$grpc
    out=$logs/client_${engine}_$protocol.log
    timeout 90 "$python" tests/interop/cuda_shared_memory_client.py --protocol "$protocol" \
      --url "$url" --tag "dt_${engine}_${protocol}_$$" --elements "$elements" >"$out" 2>"$out.err"
    code=$?
    sed -E "s/^(PASS|FAIL) /\1 $engine $protocol: /" "$out" | grep -E "^(PASS|FAIL|COPIES|FIGURE)"
    passed=$((passed + $(grep -c '^PASS ' "$out")))
    failed=$((failed + $(grep -c '^FAIL ' "$out")))
    if [ "$code" -ne 0 ] && ! grep -q '^FAIL ' "$out"; then
      fail "$engine $protocol: the client exited $code (the end of $out.err):"
      tail -15 "$out.err"
    fi
    if [ "$skip_perf" -eq 1 ]; then continue; fi
    if [ -z "$perf_analyzer" ] || [ ! -x "$perf_analyzer" ]; then
      fail "$engine $protocol: perf_analyzer not found (--perf-analyzer)"
      continue
    fi
    pa=$logs/perf_${engine}_$protocol.log
    timeout 60 "$perf_analyzer" -m Identity -u "$url" -i "$protocol" --shape x:1024 \
      --shared-memory cuda --output-shared-memory-size 4096 --concurrency-range 1:2 \
      --measurement-mode count_windows --measurement-request-count 1000 --max-trials 10 \
      --stability-percentage 25 \
      >"$pa" 2>&1
    code=$?
    grep -E "Concurrency: [0-9]+, throughput" "$pa" | sed "s/^/FIGURE perf_analyzer $engine $protocol: /"
    if [ "$code" -eq 0 ] && ! grep -qi "error" "$pa" && grep -q "Concurrency: 2, throughput" "$pa"; then
      pass "$engine $protocol: perf_analyzer --shared-memory cuda, 0 errors"
    else
      fail "$engine $protocol: perf_analyzer exited $code (the end of $pa):"
      tail -15 "$pa"
    fi
  done
  exec 3>&-
  stop_server
done

echo "== summary"
echo "$passed passed, $failed failed; logs in $logs"
if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "FAILED"
  exit 1
fi
if [ ${#driver_args[@]} -gt 0 ]; then
  echo "OK with ${driver_args[*]}: this script's plumbing only, not the GPU path"
else
  echo "OK: CUDA shared memory and device tensors are verified on this host"
fi
