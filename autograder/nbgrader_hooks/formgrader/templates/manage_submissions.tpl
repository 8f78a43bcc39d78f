{#- Manage Submissions in the course's Formgrader: nbgrader's page with a Flags column
    (static/submissions.js fills it) and the course's commands (autograder/nbgrader_hooks/formgrader). -#}
{%- extends 'nbgrader/manage_submissions.tpl' -%}

{%- block head -%}
{{ super() }}
<script src="{{ base_url }}/formgrader/course/submissions.js"></script>
<link rel="stylesheet" href="{{ base_url }}/formgrader/course/flags.css" />
{%- endblock head -%}

{%- block messages -%}
<div class="panel panel-default">
  <div class="panel-body">
    <p>
      Autograde a learner with their <span class="glyphicon glyphicon-flash"></span> button, or
      the whole chapter, on several cores, from a
      <a target="_blank" href="{{ base_url }}/terminals/1">terminal</a>:
      <code>python -m autograder autograde {{ assignment_id }} --jobs 2</code>.
      Either way grading runs each notebook in the sandbox, checks every graded function
      outside it and flags what a human should look at: read a submission's
      <b>Flags</b> before you trust its score.
    </p>
  </div>
</div>
{%- endblock -%}

{%- block table_header -%}
<tr>
  <th>Student Name</th>
  <th class="text-center">Student ID</th>
  <th class="text-center">Timestamp</th>
  <th class="text-center">Status</th>
  <th class="text-center">Score</th>
  <th class="text-center no-sort">Autograde</th>
  <th class="text-center no-sort">Generate Feedback</th>
  <th class="text-center no-sort">Release Feedback</th>
  <th>Flags</th>
</tr>
{%- endblock -%}

{%- block table_body -%}
<tr>
  <td>Loading, please wait...</td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
  <td></td>
</tr>
{%- endblock -%}
