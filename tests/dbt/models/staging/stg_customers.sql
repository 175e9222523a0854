select customer_id, name, segment, cast(signup_date as date) as signup_date
from {{ ref('customers') }}
