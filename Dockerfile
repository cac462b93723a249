# Sigil for a dstack CVM (Intel TDX): docs/enclave.md, "Running in a TEE".
#
# The image is what the compose hash pins (by digest, deploy/docker-compose.yml), so it is built from one
# commit with nothing taken from the host but the checkout: `docker build -t sigil:<commit> .` in a clean
# clone of that commit. Pin the base image by digest (NODE_IMAGE=node:20-bookworm-slim@sha256:…) for a
# build others can repeat; a tag alone can move.
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}

# better-sqlite3, keccak and secp256k1 build native code when no prebuilt binary matches.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . .
# npm ci installs exactly package-lock.json (the versions the measurement lists) and runs `prepare`, which
# builds the dashboard; the contracts are compiled now so that a first start deploys without a compiler
# download inside the CVM.
RUN npm ci --no-audit --no-fund \
 && npx hardhat compile --quiet \
 && npm cache clean --force

# The root key comes from dstack's KMS through /var/run/dstack.sock (mounted by the compose file); these
# are fixed here and again in the compose file, so no deploy-time variable can turn the KMS off.
ENV SIGIL_ROOT_KEY_PROVIDER=dstack \
    SIGIL_DEV_MODE=false \
    SIGIL_HOST=0.0.0.0 \
    SIGIL_DATA_DIR=/data \
    SIGIL_LOG_FILE=-

EXPOSE 8000
CMD ["npm", "start"]
