# wait-for-model: holds a serving pod until its model is on the model volume.
# A catalogue name is looked up in this image's catalogue for its file name under
# $DEEPINFER_HOME/models (the pull Job renames the file there only once it is complete);
# an absolute path is waited for as it is (copy a model directory in under a temporary
# name and rename it when complete).
case "$DEEPINFER_MODEL" in
  /*) target="$DEEPINFER_MODEL" ;;
  *)
    file=$(deepinfer pull --list | while read -r name f; do
      if [ "$name" = "$DEEPINFER_MODEL" ]; then echo "$f"; fi
    done)
    if [ -z "$file" ]; then
      echo "wait-for-model: '$DEEPINFER_MODEL' is not in this image's catalogue (deepinfer pull --list)" >&2
      exit 1
    fi
    target="$DEEPINFER_HOME/models/$file" ;;
esac
until [ -e "$target" ]; do
  echo "wait-for-model: waiting for $target"
  sleep 10
done
echo "wait-for-model: $target is there"
