# The imreview GitHub Action (runs.using: docker). Rules from the runner contract: run as root
# (no USER), do not rely on WORKDIR (the workspace is mounted over the working directory), and
# start from an absolute path. Release builds pin the base image by digest:
#   ARG BASE_IMAGE=python:3.11-slim@sha256:<digest of the tag at release time>
# The runner builds with no build arguments, so the default is what users get. The argument lets
# the same Dockerfile build on a stand-in base where Docker Hub is out of reach
# (benchmarks/image_base.sh; the measurements in benchmarks/IMAGE.md); the base must provide
# /usr/local/bin/python with pip, as python:3.11-slim does.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV LITELLM_LOCAL_MODEL_COST_MAP=True \
    HF_HUB_OFFLINE=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GIT_CONFIG_COUNT=1 \
    GIT_CONFIG_KEY_0=safe.directory \
    GIT_CONFIG_VALUE_0=/github/workspace

# git comes from the base image's Debian release, security updates included; an exact version pin
# would break the build whenever Debian publishes one (the base image is what gets pinned).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first (a layer that changes only with the lock), every file checked by hash. One RUN,
# because a file deleted in a later layer still ships in the earlier one (the uninstall below used
# to be its own step and saved 0 bytes of the image: benchmarks/IMAGE.md).
# - litellm requires boto3 (Bedrock), tokenizers and huggingface-hub (Hugging Face models) at install
#   time but imports them only for those providers; imreview's paths (import, token_counter for
#   OpenAI-style and Anthropic models, completion over HTTP) run without them. Removed by name after
#   the hash-checked install, so the build stays reproducible; the smoke test fails the build if
#   litellm ever starts importing them.
# - Also never loaded: the dependencies' own test suites and the litellm proxy's web UI and
#   Swagger pages (static files served only by `litellm --proxy`).
# - Bytecode: --no-compile, then the smoke test imports with bytecode writing on, so only the
#   modules a run loads get a .pyc (a run starts as fast as with every .pyc, at a fraction of the
#   size); the rest compile in memory if ever imported (PYTHONDONTWRITEBYTECODE stays set).
COPY requirements.lock /opt/imreview/requirements.lock
RUN set -eu; \
    python -m pip install --require-hashes --no-deps -r /opt/imreview/requirements.lock --no-compile; \
    python -m pip uninstall -y -q boto3 botocore s3transfer jmespath tokenizers hf-xet huggingface-hub; \
    site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    rm -rf "$site"/*/tests "$site"/*/test "$site/litellm/proxy/_experimental/out" "$site/litellm/proxy/swagger"; \
    PYTHONDONTWRITEBYTECODE='' python -c "import github, jinja2, yaml, click, unidiff, json_repair, litellm; \
assert litellm.token_counter(model='openai/gpt-4o-mini', text='hi') > 0; \
assert litellm.token_counter(model='anthropic/claude-3-5-haiku-latest', text='hi') > 0; \
litellm.completion(model='openai/gpt-4o-mini', messages=[{'role': 'user', 'content': 'hi'}], mock_response='ok')"

# The package itself, built from /opt/imreview/src and installed without touching the pins: its
# build backend (hatchling) and that backend's dependencies come from requirements-build.lock, hash
# checked (no unpinned download at build time), and leave the image in the same step. The sources
# are removed afterwards so nothing beside entrypoint.py shadows the installed package (which
# carries the templates as package data).
COPY requirements-build.lock pyproject.toml README.md LICENSE /opt/imreview/src/
COPY reviewer /opt/imreview/src/reviewer
COPY templates /opt/imreview/src/templates
RUN set -eu; \
    python -m pip install --require-hashes --no-deps -r /opt/imreview/src/requirements-build.lock --no-compile; \
    python -m pip install --no-deps /opt/imreview/src --no-build-isolation; \
    python -m pip uninstall -y -q hatchling pathspec pluggy trove-classifiers; \
    rm -rf /opt/imreview/src

# A startup hook in site-packages runs inside every Python process (the litellm 1.82.7/1.82.8
# compromise shipped one): fail the build on any *.pth file that is not known. Then, in the same
# layer, the templates are compiled once into a cache the runs read (issue 9: ~80 ms per run).
ENV IMREVIEW_CACHE_DIR=/opt/imreview/cache
RUN set -eu; \
    site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    unexpected="$(find "$site" -name '*.pth' ! -name 'distutils-precedence.pth')"; \
    if [ -n "$unexpected" ]; then echo "unexpected .pth files in $site: $unexpected" >&2; exit 1; fi; \
    python -c 'import reviewer.cli, litellm, github'; \
    python -c "from reviewer.render import Renderer; [Renderer(language=l).warm() for l in ('en', 'zh-CN')]"

COPY entrypoint.py /opt/imreview/entrypoint.py
ENTRYPOINT ["/usr/local/bin/python", "/opt/imreview/entrypoint.py"]
