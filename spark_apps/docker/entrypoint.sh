#!/usr/bin/env bash
# Container entrypoint for Spark on Kubernetes (Spark's own scheduler, or the Spark Operator
# through it). Spark starts a driver pod with "driver <spark-submit args>" and executor pods with
# "executor", passing everything else in SPARK_* environment variables; anything else is run as
# given. It honours what Spark's own image entrypoint does:
# - a passwd entry for a uid the image does not know (a pod's runAsUser): Hadoop looks the user up;
# - SPARK_CLASSPATH and SPARK_EXTRA_CLASSPATH (spark.{driver,executor}.extraClassPath reach
#   executors that way), HADOOP_CONF_DIR (hadoopConfigMap), SPARK_CONF_DIR (sparkConfigMap, else
#   $SPARK_HOME/conf) on the executors' classpath, in Spark's order;
# - SPARK_JAVA_OPT_<n>, the executors' JVM options, in order; PYSPARK_PYTHON, PYSPARK_DRIVER_PYTHON.
set -euo pipefail

uid="$(id -u)"
gid="$(id -g)"
if ! getent passwd "${uid}" >/dev/null 2>&1; then
  if [ -w /etc/passwd ]; then
    echo "${uid}:x:${uid}:${gid}:${SPARK_USER_NAME:-anonymous uid}:${SPARK_HOME:-/opt/ordo}:/bin/false" >> /etc/passwd
  else
    echo "entrypoint: cannot add a passwd entry for uid ${uid} (/etc/passwd is not writable)" >&2
  fi
fi

if [ -z "${JAVA_HOME:-}" ]; then
  JAVA_HOME="$(java -XshowSettings:properties -version 2>&1 >/dev/null | awk '/java.home/ {print $3}')"
fi

spark_classpath="${SPARK_CLASSPATH:-}"
spark_classpath="${spark_classpath:+${spark_classpath}:}${SPARK_HOME}/jars/*"
if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
  spark_classpath="${spark_classpath}:${SPARK_EXTRA_CLASSPATH}"
fi
if [ -n "${HADOOP_CONF_DIR+x}" ]; then
  spark_classpath="${HADOOP_CONF_DIR}:${spark_classpath}"
fi
if [ -n "${SPARK_CONF_DIR+x}" ]; then
  spark_classpath="${SPARK_CONF_DIR}:${spark_classpath}"
else
  spark_classpath="${SPARK_HOME}/conf:${spark_classpath}"
fi

[ -z "${PYSPARK_PYTHON+x}" ] || export PYSPARK_PYTHON
[ -z "${PYSPARK_DRIVER_PYTHON+x}" ] || export PYSPARK_DRIVER_PYTHON

case "${1:-}" in
  driver)
    shift
    exec "${SPARK_HOME}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    java_opts=()
    while IFS= read -r name; do java_opts+=("${!name}"); done < <(
      compgen -e | grep '^SPARK_JAVA_OPT_[0-9]*$' | sort -t_ -k4 -n
    )
    exec "${JAVA_HOME}/bin/java" \
      "${java_opts[@]}" \
      "-Xms${SPARK_EXECUTOR_MEMORY}" "-Xmx${SPARK_EXECUTOR_MEMORY}" \
      -cp "${spark_classpath}${SPARK_DIST_CLASSPATH:+:${SPARK_DIST_CLASSPATH}}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  *)
    exec "$@"
    ;;
esac
