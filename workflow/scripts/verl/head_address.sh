#!/usr/bin/env bash
# The IPv4 address the Ray head (this node) is reached at by the other nodes of the allocation:
#   head_address.sh WORKER_HOST
# VERL_HEAD_IFACE set (e.g. ib0): that interface's address. Else the source address of the route to the
# worker (`ip route get`), the interface the nodes really talk over, not the first of `hostname
# --ip-address` (127.0.1.1 on Debian-style hosts, or a management network). A loopback is refused.
set -euo pipefail
WORKER=${1:?usage: head_address.sh WORKER_HOST}
if [ -n "${VERL_HEAD_IFACE:-}" ]; then
  ADDR=$(ip -4 -o addr show dev "$VERL_HEAD_IFACE" | awk '{split($4, a, "/"); print a[1]; exit}')
  HOW="interface VERL_HEAD_IFACE=$VERL_HEAD_IFACE"
else
  WORKER_IP=$(getent ahostsv4 "$WORKER" | awk '{print $1; exit}' || true)
  [ -n "$WORKER_IP" ] || { echo "head_address.sh: cannot resolve worker $WORKER" >&2; exit 1; }
  ADDR=$(ip -4 route get "$WORKER_IP" | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
  HOW="route to $WORKER ($WORKER_IP)"
fi
case "$ADDR" in
  "") echo "head_address.sh: no IPv4 address from the $HOW; set VERL_HEAD_IFACE to the interface the nodes share" >&2; exit 1 ;;
  127.*) echo "head_address.sh: the $HOW gives loopback $ADDR, which other nodes cannot reach; set VERL_HEAD_IFACE to the interface the nodes share (e.g. ib0)" >&2; exit 1 ;;
esac
echo "$ADDR"
