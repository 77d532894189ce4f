# neardup service image. Keys are required: mount a keys file and point NEARDUP_API_KEYS_FILE at
# it (one "KEY SCOPE[,SCOPE...]" a line); without one, `neardup serve` refuses 0.0.0.0.
#   docker build -t neardup .
#   docker run -p 8000:8000 -v neardup-data:/data -v ./keys.txt:/run/keys.txt:ro \
#     -e NEARDUP_API_KEYS_FILE=/run/keys.txt -e NEARDUP_ALLOWED_HOSTS=neardup.example.com neardup
# NEARDUP_ALLOWED_HOSTS lists the names clients reach it by (Host header); by default only the
# loopback names are served, which the HEALTHCHECK uses.
# As a replica of a shared PostgreSQL store (the postgres extra is installed; docs/postgres.md),
# one container per replica, the password outside the URL:
#   docker run -p 8001:8000 -v ./keys.txt:/run/keys.txt:ro -e NEARDUP_API_KEYS_FILE=/run/keys.txt \
#     -e NEARDUP_STORE_URL='postgresql://neardup@db.internal:5432/neardup?sslmode=verify-full' \
#     -e PGPASSWORD -e NEARDUP_STORE_SCHEMA=neardup neardup
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    NEARDUP_DATA_DIR=/data \
    NEARDUP_HOST=0.0.0.0 \
    NEARDUP_PORT=8000

RUN useradd --create-home --uid 10001 neardup \
    && mkdir -p /data && chown neardup:neardup /data

WORKDIR /app
COPY pyproject.toml README.md ./
# The import package is neardup/: its core and app are links to ../core and ../app, which COPY
# keeps as links, resolved by the copies of core/ and app/ beside it.
COPY core ./core
COPY app ./app
COPY neardup ./neardup
# Runtime dependencies and the PostgreSQL driver (to run as a replica): no test, lint or bench
# extras.
RUN pip install '.[postgres]'

USER neardup
# Compile the numba kernels once, into the image: as this user (site-packages is root's, so numba
# caches them in ~/.cache/numba), so that no container compiles them at start. A host whose CPU
# differs from the builder's compiles its own on first use.
RUN python -c "from neardup.core.engine import warm_worker; warm_worker()"
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"

CMD ["neardup", "serve", "--host", "0.0.0.0"]
