#!/usr/bin/env bash
# The text_direction example's checks on a GPU host, in one run of about a minute and a half:
#
# 1. the real-GPU tests of tests/text_direction_gpu_test.ts: the GPU backend against the CPU
#    backend at batches 1, 8 and 64, and the model served from a Worker on cuda:0 on every
#    installed engine over HTTP and gRPC (answers from "cuda:0 GPU", equal to the CPU's), plus
#    kernels.cu through the host's NVRTC;
# 2. bench/text_direction.ts: images/s on the GPU instance against the CPU instance, batches 1, 8
#    and 64, served and direct, written to bench/results/.
#
# Then a summary. It exits non-zero when a test fails, when a GPU test was skipped (the GPU path
# was not verified: the summary says what was missing) or when the benchmark fails.
#
#     bash examples/text_direction/gpu_check.sh
#
# Type checking is skipped (--no-check): `deno task static` checks these files on any host.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NO_COLOR=1
logs=$(mktemp -d)

echo "== host"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not available"
deno --version | head -1

echo "== 1/2: real-GPU tests (tests/text_direction_gpu_test.ts)"
deno test -A --no-check tests/text_direction_gpu_test.ts --filter "/this host's|real NVRTC/" \
  >"$logs/tests.log" 2>&1
tests=$?
grep -E " \.\.\. (ok|FAILED|ignored)|GPU backend:|max abs diff|^Instance |passed .* failed" \
  "$logs/tests.log"
skipped=$(grep -c " \.\.\. ignored" "$logs/tests.log")
if [ "$tests" -ne 0 ]; then
  echo "-- test failures (the end of $logs/tests.log):"
  sed -n '/ERRORS/,$p' "$logs/tests.log" | head -80
fi

echo "== 2/2: bench/text_direction.ts"
deno run -A --no-check bench/text_direction.ts --seconds 2 >"$logs/bench.log" 2>&1
bench=$?
grep -E "^\||^GPU|^Wrote|rror" "$logs/bench.log"
if [ "$bench" -ne 0 ]; then
  echo "-- benchmark failure (the end of $logs/bench.log):"
  tail -40 "$logs/bench.log"
fi

echo "== summary"
echo "tests: exit $tests, $skipped skipped; bench: exit $bench; logs in $logs"
if [ "$tests" -ne 0 ] || [ "$bench" -ne 0 ]; then
  echo "FAILED"
  exit 1
fi
if [ "$skipped" -ne 0 ]; then
  echo "NOT VERIFIED: $skipped GPU test(s) skipped (see the reasons in their names above)"
  exit 1
fi
echo "OK: the GPU path is verified on this host"
