UPDATE presale_codes SET used = used - $2 WHERE id = $1
