package redisstore

import "strings"

// Redis Cluster's key-to-slot map (CRC16/XMODEM of the key's hash tag,
// modulo 16384), so that a script touching many keys can be given only
// keys of one slot. Single-node and sentinel clients take any keys.

const clusterSlots = 16384

// keySlot is the cluster slot of key: the CRC16 of the text between the
// first '{' and the next '}' when that is not empty, else of the key.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % clusterSlots)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
