SELECT intent_id, client_secret FROM payments WHERE order_id = $1
