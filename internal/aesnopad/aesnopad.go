// Package aesnopad is MariaDB's AES without padding, as its encryption plugins apply it to
// redo log records and to pages (my_crypt.cc, MyCTX_nopad): CTR, or CBC whose final
// partial block is XORed with the IV encrypted under the key.
package aesnopad

import (
	"crypto/aes"
	"crypto/cipher"
)

// Transform encrypts or decrypts b in place with block and iv (one AES block), in CTR
// mode if ctr, else in MariaDB's no-padding CBC.
func Transform(block cipher.Block, ctr bool, b, iv []byte, encrypt bool) {
	if ctr {
		cipher.NewCTR(block, iv).XORKeyStream(b, b)
		return
	}
	full := len(b) / aes.BlockSize * aes.BlockSize
	if full > 0 {
		if encrypt {
			cipher.NewCBCEncrypter(block, iv).CryptBlocks(b[:full], b[:full])
		} else {
			cipher.NewCBCDecrypter(block, iv).CryptBlocks(b[:full], b[:full])
		}
	}
	if full < len(b) {
		var mask [aes.BlockSize]byte
		block.Encrypt(mask[:], iv)
		for i := full; i < len(b); i++ {
			b[i] ^= mask[i-full]
		}
	}
}
