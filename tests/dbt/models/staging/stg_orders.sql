select order_id, customer_id, status, amount, cast(ordered_at as date) as ordered_at
from {{ ref('orders') }}
where status <> 'returned'
