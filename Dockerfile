# One image per service: docker build --build-arg SERVICE=scheduler -t gpucloud-scheduler .
# (SERVICE=gateway serves the console, built in the node stage from the services' own OpenAPI.)
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY libs libs
COPY services services
RUN pip install -c constraints.txt . && useradd --uid 10001 --no-create-home gpucloud
COPY scripts/console_openapi.py scripts/
RUN ENVIRONMENT=development python scripts/console_openapi.py /openapi

FROM node:20-slim AS console
WORKDIR /console
COPY console/package.json console/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY console ./
COPY --from=base /openapi /openapi
RUN OPENAPI_DIR=/openapi npm run gen && npm run build

FROM base
COPY --from=console /console/dist /app/console/dist
ARG SERVICE=inventory
ENV SERVICE=${SERVICE} HTTP_HOST=0.0.0.0 ENVIRONMENT=production
USER 10001
# `python -m services.telemetry agent` runs the node agent from the telemetry image.
CMD ["sh", "-c", "exec python -m services.${SERVICE}"]
