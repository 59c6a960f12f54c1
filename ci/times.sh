# Sourced by ci/setup.sh and ci/cleanroot.sh: what each step of a run took, said in one line at
# the end and appended to $HVD_LINREG_TIMES if set (ci/test.sh prints that file after its stages).
times=()
step_start=$SECONDS
# step_done NAME: the step that began at the last call (or at sourcing) ends now.
step_done() {
  times+=("$1 $((SECONDS - step_start)) s")
  step_start=$SECONDS
}
# times_line TITLE [MORE]: "TITLE: step N s, step N s MORE", printed and recorded.
times_line() {
  local line
  printf -v line '%s, ' "${times[@]}"
  line="$1: ${line%, }${2:+ $2}"
  printf '%s\n' "$line"
  if [ -n "${HVD_LINREG_TIMES:-}" ]; then printf '%s\n' "$line" >>"$HVD_LINREG_TIMES"; fi
}
