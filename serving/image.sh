#!/bin/sh
# The build steps every llmctl serving image shares, written once. Each serving/<runtime>/Dockerfile
# copies this file and the runtime's lock(s) from serving/locks/ into /tmp/llmctl/locks/ and runs two
# steps, so the locked packages stay in their own layer and a source change only redoes the second:
#   image.sh requirements  install the runtime's lock with --require-hashes: the lock whose name has
#                          "neuron" when the base image is a Neuron one (BASE_IMAGE, re-declared after
#                          FROM) and there is one, the one ending "-efa" when it is AWS's Ray Serve LLM
#                          DLC (a ":serve-llm-" tag), the other lock otherwise; first what the lock leaves
#                          out (<lock>.outside.txt, e.g. the CPU build of torch from its own index).
#                          On an externally managed interpreter (PEP 668: EXTERNALLY-MANAGED in its
#                          stdlib folder) it installs into a venv at /opt/llmctl/venv that sees the
#                          image's packages; the Dockerfiles put that venv first on PATH.
#   image.sh app SRC       pip-install llmctl itself, without dependencies, from the build context
#                          bind-mounted at SRC; it builds from a copy, so a read-only mount and a
#                          non-root image user (rayproject images run as `ray`) both work
set -eu
here=$(dirname "$0")
venv=/opt/llmctl/venv

pip_install() {
    python3 -m pip install --no-cache-dir --disable-pip-version-check "$@"
}

case "${1:-}" in
    requirements)
        lock=""
        for file in "$here"/locks/*.txt; do
            case "$file" in *.outside.txt) continue ;; esac
            case "$file:${BASE_IMAGE:-}" in
                *neuron*.txt:*neuron*) lock="$file" ;;
                *neuron*.txt:*) ;;
                *-efa.txt:*:serve-llm-*) lock="$file" ;;
                *-efa.txt:*) ;;
                *:*neuron* | *:*:serve-llm-*) if [ -z "$lock" ]; then lock="$file"; fi ;;
                *) lock="$file" ;;
            esac
        done
        if [ -z "$lock" ]; then
            echo "image.sh: no lock in $here/locks for ${BASE_IMAGE:-this base image}" >&2
            exit 2
        fi
        stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
        if [ -f "$stdlib/EXTERNALLY-MANAGED" ]; then
            python3 -m venv --without-pip --system-site-packages "$venv"
            PATH="$venv/bin:$PATH"
        fi
        outside="${lock%.txt}.outside.txt"
        if [ -f "$outside" ]; then pip_install -r "$outside"; fi
        pip_install --require-hashes -r "$lock"
        ;;
    app)
        src=$(mktemp -d)
        cp -R "${2:?image.sh app needs the source directory}/." "$src"
        if [ -d "$venv" ]; then PATH="$venv/bin:$PATH"; fi
        pip_install --no-deps "$src"
        rm -rf "$src"
        ;;
    *)
        echo "usage: image.sh requirements | image.sh app SRC" >&2
        exit 2
        ;;
esac
