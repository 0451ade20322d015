# Sourced by testbed/kube-apiserver/build, testbed/kube-node/build and testbed/promtool/build.
#
# build_jobs: how many packages compile at once: ORDO_BUILD_JOBS, else every core of the machine
# (under nice, so what else runs keeps its share); a build of kube-apiserver takes 15 minutes on
# one core.
#
# go_progress WHAT: reads `go build -v`'s output (each package's path as it compiles) and says
# every 100 packages how many compiled and for how long; any other line (an error) goes through.

build_jobs() {
  echo "${ORDO_BUILD_JOBS:-$(nproc 2>/dev/null || echo 1)}"
}

go_progress() {
  local what="$1" count=0 line began=$SECONDS
  while IFS= read -r line; do
    if [[ "$line" =~ ^[A-Za-z0-9._~/-]+$ ]]; then
      count=$((count + 1))
      if ((count % 100 == 0)); then
        echo "  $what: $count packages compiled ($((SECONDS - began)) s)" >&2
      fi
    else
      echo "$line" >&2
    fi
  done
  echo "  $what: $count packages compiled in $((SECONDS - began)) s" >&2
}
