# One image per service: docker build --build-arg SERVICE=scheduler -t gpucloud-scheduler .
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY libs libs
COPY services services
RUN pip install -c constraints.txt . && useradd --uid 10001 --no-create-home gpucloud

FROM base
ARG SERVICE=inventory
ENV SERVICE=${SERVICE} HTTP_HOST=0.0.0.0 ENVIRONMENT=production
USER 10001
# `python -m services.telemetry agent` runs the node agent from the telemetry image.
CMD ["sh", "-c", "exec python -m services.${SERVICE}"]
