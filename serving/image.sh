#!/bin/sh
# The build steps every llmctl serving image shares, written once. Each serving/<runtime>/Dockerfile
# copies this file next to its requirements file(s) and runs two steps, so the pinned packages stay
# in their own layer and a source change only redoes the second:
#   image.sh requirements  pip-install the runtime's pinned packages: requirements-neuron.txt when the
#                          base image is a Neuron one (BASE_IMAGE, re-declared after FROM) and the
#                          runtime has that file, requirements.txt otherwise
#   image.sh app SRC       pip-install llmctl itself, without dependencies, from the build context
#                          bind-mounted at SRC (read-write: the build's scratch files are dropped after)
set -eu
here=$(dirname "$0")

pip_install() {
    pip install --no-cache-dir --disable-pip-version-check "$@"
}

case "${1:-}" in
    requirements)
        file="$here/requirements.txt"
        case "${BASE_IMAGE:-}" in
            # the Neuron containers live under public.ecr.aws/neuron/ (their names carry "neuronx")
            *neuron*) if [ -f "$here/requirements-neuron.txt" ]; then file="$here/requirements-neuron.txt"; fi ;;
        esac
        pip_install -r "$file"
        ;;
    app)
        pip_install --no-deps "${2:?image.sh app needs the source directory}"
        ;;
    *)
        echo "usage: image.sh requirements | image.sh app SRC" >&2
        exit 2
        ;;
esac
