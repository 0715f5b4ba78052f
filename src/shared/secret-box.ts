/**
 * Provider API keys at rest: AES-256-GCM with a key derived from SECRET_KEY
 * (or the key file the embedded default keeps in its data directory).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const PREFIX = 'pwenc:v1:';

export class SecretBox {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = deriveKey(secret, 'promptwire.secret-box.v1');
  }

  static isEncrypted(value: string): boolean {
    return value.startsWith(PREFIX);
  }

  encrypt(plain: string): string {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.key, iv);
    const encrypted = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${iv.toString('base64url')}:${cipher.getAuthTag().toString('base64url')}:${encrypted.toString('base64url')}`;
  }

  /** Null when the value was not encrypted with this key (rotated key, tampered value). */
  decrypt(value: string): string | null {
    if (!SecretBox.isEncrypted(value)) return null;
    const [iv, tag, data] = value.slice(PREFIX.length).split(':');
    if (!iv || !tag || data === undefined) return null;
    try {
      const decipher = crypto.createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      return null;
    }
  }
}

/**
 * A key of 32 bytes for one use of the server's secret, named by a fixed
 * label: the same secret gives the same key on every instance and after a
 * restart, and each use its own key. The label is the salt: that is fine here,
 * the derivation only has to turn any passphrase into 32 bytes per use.
 * scrypt, not a plain HKDF, because some keys sign what clients receive
 * (paging cursors): guessing a passphrase SECRET_KEY from them stays as slow
 * as scrypt.
 */
export function deriveKey(secret: string, label: string): Buffer {
  return crypto.scryptSync(secret, label, 32);
}

/** The embedded default: a random key generated once into the data directory, readable by the owner only. */
export function loadOrCreateKeyFile(dataDirectory: string): string {
  const file = path.join(dataDirectory, 'secret.key');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  fs.mkdirSync(dataDirectory, { recursive: true });
  const key = crypto.randomBytes(32).toString('hex');
  fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}
