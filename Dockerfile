# The imreview GitHub Action (runs.using: docker). Rules from the runner contract: run as root
# (no USER), do not rely on WORKDIR (the workspace is mounted over the working directory), and
# start from an absolute path. Release builds pin the base image by digest:
#   FROM python:3.11-slim@sha256:<digest of the tag at release time>
FROM python:3.11-slim

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

# Dependencies first (a layer that changes only with the lock), every file checked by hash.
COPY requirements.lock /opt/imreview/requirements.lock
RUN python -m pip install --require-hashes --no-deps -r /opt/imreview/requirements.lock

# litellm requires boto3 (Bedrock), tokenizers and huggingface-hub (Hugging Face models) at install
# time but imports them only for those providers; imreview's paths (import, token_counter for
# OpenAI-style and Anthropic models, completion over HTTP) run without them: 63 of 421 MB, measured
# in benchmarks/README.md. Removed by name, after the hash-checked install, so the build stays
# reproducible; the smoke test below fails the build if litellm ever starts importing them.
RUN python -m pip uninstall -y -q boto3 botocore s3transfer jmespath tokenizers hf-xet huggingface-hub \
    && python -c "import litellm; assert litellm.token_counter(model='openai/gpt-4o-mini', text='hi') > 0"

# The package itself, built from /opt/imreview/src and installed without touching the pins. The
# sources are removed afterwards so nothing beside entrypoint.py shadows the installed package
# (which carries the templates as package data).
COPY pyproject.toml README.md LICENSE /opt/imreview/src/
COPY reviewer /opt/imreview/src/reviewer
COPY templates /opt/imreview/src/templates
RUN python -m pip install --no-deps /opt/imreview/src \
    && rm -rf /opt/imreview/src

# A startup hook in site-packages runs inside every Python process (the litellm 1.82.7/1.82.8
# compromise shipped one): fail the build on any *.pth file that is not known.
RUN set -eu; \
    site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    unexpected="$(find "$site" -name '*.pth' ! -name 'distutils-precedence.pth')"; \
    if [ -n "$unexpected" ]; then echo "unexpected .pth files in $site: $unexpected" >&2; exit 1; fi; \
    python -c 'import reviewer.cli, litellm, github'

# Templates compiled once, at build time, into a cache the runs read (issue 9: ~80 ms per run).
ENV IMREVIEW_CACHE_DIR=/opt/imreview/cache
RUN python -c "from reviewer.render import Renderer; [Renderer(language=l).warm() for l in ('en', 'zh-CN')]"

COPY entrypoint.py /opt/imreview/entrypoint.py
ENTRYPOINT ["/usr/local/bin/python", "/opt/imreview/entrypoint.py"]
