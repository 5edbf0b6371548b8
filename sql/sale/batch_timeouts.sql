SELECT set_config('lock_timeout', $1, true) AS "lock_timeout!",
       set_config('statement_timeout', $1, true) AS "statement_timeout!"
