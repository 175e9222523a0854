-- A singular test: rows returned are failures.
select customer_id, total_amount
from {{ ref('customer_orders') }}
where total_amount < 0
