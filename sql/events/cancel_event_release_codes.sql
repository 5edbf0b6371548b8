UPDATE presale_codes SET used = 0 WHERE event_id = $1 AND used <> 0
