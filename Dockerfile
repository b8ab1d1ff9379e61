FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY server ./server
COPY migrations ./migrations
RUN pip install --upgrade pip && pip install -e .
# Editable install: the server finds migrations/ beside its package in /app.
RUN useradd --system --home /app tripeaks && mkdir -p /app/.tripeaks && chown tripeaks /app/.tripeaks
USER tripeaks
ENV TRIPEAKS_HOST=0.0.0.0 TRIPEAKS_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz').status != 200)"
CMD ["tripeaks", "serve"]
