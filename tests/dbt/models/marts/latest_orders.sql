{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='order_id') }}
-- Each run replaces the rows of the orders it sees.
select order_id, customer_id, status, amount, {{ var('run_number', 1) }} as run_number
from {{ ref('stg_orders') }}
{% if is_incremental() %}
where amount > 50
{% endif %}
