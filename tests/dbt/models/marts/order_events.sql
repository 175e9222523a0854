{{ config(materialized='incremental', incremental_strategy='append') }}
-- Each run appends the orders it sees, stamped with the run's number.
select order_id, status, amount, {{ var('run_number', 1) }} as run_number
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where order_id >= (select min(order_id) from {{ this }})
{% endif %}
