#!/bin/sh
# Host discovery for elastic runs: prints the hosts of a plain file, one `host:slots` line
# each, as horovodrun --host-discovery-script wants them. Edit the file to add or remove a
# host; horovodrun runs this every second and the job follows.
#
#   HVD_LINREG_HOSTS=/path/to/hosts horovodrun -np 4 --min-np 2 \
#     --host-discovery-script hostfiles/discover_hosts.sh hvd-linreg --elastic
#
# The file defaults to elastic-hosts next to this script. Blank lines and lines starting with #
# are skipped. An unreadable file is an error: at the start horovodrun then stops at once;
# later it warns and keeps the hosts it knew (replace the file with mv, not by rewriting it).
file=${HVD_LINREG_HOSTS:-$(dirname "$0")/elastic-hosts}
if [ ! -r "$file" ]; then
  echo "discover_hosts.sh: cannot read the hosts file $file (set HVD_LINREG_HOSTS)" >&2
  exit 1
fi
grep -Ev '^[[:space:]]*(#|$)' "$file" | tr -d '[:blank:]\r'
exit 0
