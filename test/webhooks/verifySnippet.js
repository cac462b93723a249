// The verification snippet of docs/webhooks.md, verbatim (a test checks that the two never differ).
const crypto = require("node:crypto");

function verifySigilSignature(secret, header, rawBody, toleranceSeconds = 300) {
  const parts = String(header)
    .split(",")
    .map((p) => p.trim().split("="));
  const t = Number(parts.find(([k]) => k === "t")?.[1]);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = crypto.createHmac("sha256", secret).update(`${t}.${rawBody}`).digest();
  return parts.some(
    ([k, v]) =>
      k === "v1" && /^[0-9a-f]{64}$/.test(v) && crypto.timingSafeEqual(Buffer.from(v, "hex"), expected),
  );
}

module.exports = { verifySigilSignature };
