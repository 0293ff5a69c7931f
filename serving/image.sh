#!/bin/sh
# The build steps every llmctl serving image shares, written once. Each serving/<runtime>/Dockerfile
# copies this file next to its requirements file(s) and runs two steps, so the pinned packages stay
# in their own layer and a source change only redoes the second:
#   image.sh requirements  pip-install the runtime's pinned packages: requirements-neuron.txt when the
#                          base image is a Neuron one (BASE_IMAGE, re-declared after FROM) and the
#                          runtime has that file, requirements.txt otherwise
#   image.sh app SRC       pip-install llmctl itself, without dependencies, from the build context
#                          bind-mounted at SRC; it builds from a copy, so a read-only mount and a
#                          non-root image user (rayproject images run as `ray`) both work
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
        src=$(mktemp -d)
        cp -R "${2:?image.sh app needs the source directory}/." "$src"
        pip_install --no-deps "$src"
        rm -rf "$src"
        ;;
    *)
        echo "usage: image.sh requirements | image.sh app SRC" >&2
        exit 2
        ;;
esac
